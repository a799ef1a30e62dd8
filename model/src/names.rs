//! Enums with one stable lowercase name per variant: the name is what JSON,
//! logs, metrics labels and Postgres `text` columns hold, so no service ever
//! matches the text by hand.
//!
//! [`named_enum!`](crate::named_enum) writes `as_str`, `ALL`, `Display`,
//! `FromStr`, serde and, with the `sqlx` feature, `sqlx::Type` for a
//! Postgres `text` column (a stored name that no variant has is a decode
//! error naming the value, never a silent default).

/// A stored or received name that no variant of the enum has.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{value}` is not a {what} (expected one of: {expected})")]
pub struct UnknownName {
    /// What kind of value was expected, e.g. `run outcome`.
    pub what: &'static str,
    /// The value received.
    pub value: String,
    /// The names that would have been accepted, comma-separated.
    pub expected: String,
}

/// Declares a fieldless enum with one stable name per variant.
///
/// ```
/// patchpilot_model::named_enum! {
///     /// A colour.
///     pub enum Colour("colour") {
///         /// Red.
///         Red = "red",
///         /// Dark blue.
///         DarkBlue = "dark_blue",
///     }
/// }
/// assert_eq!(Colour::DarkBlue.as_str(), "dark_blue");
/// assert_eq!("red".parse::<Colour>(), Ok(Colour::Red));
/// assert!("green".parse::<Colour>().unwrap_err().to_string().contains("red, dark_blue"));
/// ```
#[macro_export]
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident($what:literal) {
            $( $(#[$vmeta:meta])* $variant:ident = $text:literal ),+ $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        $vis enum $name {
            $( $(#[$vmeta])* $variant ),+
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// The stable name.
            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }
        }

        impl ::std::fmt::Display for $name {
            fn fmt(&self, f: &mut ::std::fmt::Formatter<'_>) -> ::std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl ::std::str::FromStr for $name {
            type Err = $crate::names::UnknownName;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok($name::$variant),)+
                    other => Err($crate::names::UnknownName {
                        what: $what,
                        value: other.to_owned(),
                        expected: [$($text),+].join(", "),
                    }),
                }
            }
        }

        impl $crate::__private::serde::Serialize for $name {
            fn serialize<S: $crate::__private::serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> $crate::__private::serde::Deserialize<'de> for $name {
            fn deserialize<D: $crate::__private::serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = <::std::borrow::Cow<'de, str> as $crate::__private::serde::Deserialize>::deserialize(d)?;
                s.parse().map_err($crate::__private::serde::de::Error::custom)
            }
        }

        $crate::__named_enum_sqlx!($name);
    };
}

/// `sqlx::Type` for a [`named_enum!`](crate::named_enum) in a Postgres
/// `text` column.
#[cfg(feature = "sqlx")]
#[doc(hidden)]
#[macro_export]
macro_rules! __named_enum_sqlx {
    ($name:ident) => {
        impl $crate::__private::sqlx::Type<$crate::__private::sqlx::Postgres> for $name {
            fn type_info() -> $crate::__private::sqlx::postgres::PgTypeInfo {
                <str as $crate::__private::sqlx::Type<$crate::__private::sqlx::Postgres>>::type_info()
            }
            fn compatible(ty: &$crate::__private::sqlx::postgres::PgTypeInfo) -> bool {
                <str as $crate::__private::sqlx::Type<$crate::__private::sqlx::Postgres>>::compatible(ty)
            }
        }

        impl<'q> $crate::__private::sqlx::Encode<'q, $crate::__private::sqlx::Postgres> for $name {
            fn encode_by_ref(
                &self,
                buf: &mut $crate::__private::sqlx::postgres::PgArgumentBuffer,
            ) -> Result<$crate::__private::sqlx::encode::IsNull, $crate::__private::sqlx::error::BoxDynError>
            {
                <&str as $crate::__private::sqlx::Encode<'q, $crate::__private::sqlx::Postgres>>::encode(
                    self.as_str(),
                    buf,
                )
            }
        }

        impl<'r> $crate::__private::sqlx::Decode<'r, $crate::__private::sqlx::Postgres> for $name {
            fn decode(
                value: $crate::__private::sqlx::postgres::PgValueRef<'r>,
            ) -> Result<Self, $crate::__private::sqlx::error::BoxDynError> {
                let text = <&str as $crate::__private::sqlx::Decode<
                    'r,
                    $crate::__private::sqlx::Postgres,
                >>::decode(value)?;
                Ok(text.parse::<$name>()?)
            }
        }

        impl $crate::__private::sqlx::postgres::PgHasArrayType for $name {
            fn array_type_info() -> $crate::__private::sqlx::postgres::PgTypeInfo {
                <&str as $crate::__private::sqlx::postgres::PgHasArrayType>::array_type_info()
            }
        }
    };
}

/// Without the `sqlx` feature there is nothing to implement.
#[cfg(not(feature = "sqlx"))]
#[doc(hidden)]
#[macro_export]
macro_rules! __named_enum_sqlx {
    ($name:ident) => {};
}
