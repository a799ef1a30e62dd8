//! The bus edge: every type that travels on the bus has one protobuf form
//! and one set of checks made when it is decoded.

use patchpilot_proto::Message;

use crate::ValidationError;

/// A domain type with a protobuf wire form.
pub trait Wire: Sized {
    /// The protobuf message.
    type Proto: Message + Default;
    /// Its full name, for errors: `patchpilot.v1.RemediationJob`.
    const PROTO_NAME: &'static str;

    /// The wire form.
    fn to_wire(&self) -> Self::Proto;

    /// The domain form of a decoded message, checked; the error names the
    /// field (relative to the message).
    fn from_wire(message: Self::Proto) -> Result<Self, ValidationError>;

    /// Encodes for the bus.
    fn encode(&self) -> Vec<u8> {
        self.to_wire().encode_to_vec()
    }

    /// Decodes and checks bytes from the bus.
    fn decode(bytes: &[u8]) -> Result<Self, ValidationError> {
        let message = Self::Proto::decode(bytes)
            .map_err(|e| ValidationError::new("", format!("payload is not a {}: {e}", Self::PROTO_NAME)))?;
        Self::from_wire(message)
    }
}

/// Implements [`Wire`] from a `From<&T> for Proto` and a
/// `TryFrom<Proto> for T`.
macro_rules! wire_by_conversions {
    ($ty:ty, $proto:ty, $name:literal) => {
        impl $crate::wire::Wire for $ty {
            type Proto = $proto;
            const PROTO_NAME: &'static str = $name;
            fn to_wire(&self) -> $proto {
                <$proto>::from(self)
            }
            fn from_wire(message: $proto) -> Result<Self, $crate::ValidationError> {
                <$ty>::try_from(message)
            }
        }
    };
}
pub(crate) use wire_by_conversions;
