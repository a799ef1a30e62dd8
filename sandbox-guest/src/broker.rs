//! The guest's end of the path to the capability broker: a listener on
//! loopback port [`BROKER_GUEST_PORT`] whose every connection is carried,
//! byte for byte, to the host's [`BROKER_PORT`] over vsock.
//!
//! It adds nothing and checks nothing: the host's terminator stamps the
//! run's identity from the VM's own socket, so what the guest sends cannot
//! change who it is. Loopback only: a container the agent builds cannot
//! reach it (its traffic is not the guest's loopback).

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;

use patchpilot_sandbox_wire::protocol::{BROKER_GUEST_PORT, BROKER_PORT, GuestConnector};
use tokio::net::TcpListener;
use tokio::task::JoinSet;

/// The address the agent reaches the broker at.
pub fn guest_addr() -> SocketAddr {
    SocketAddr::from((Ipv4Addr::LOCALHOST, BROKER_GUEST_PORT))
}

/// Binds [`guest_addr`].
pub async fn bind() -> std::io::Result<TcpListener> {
    TcpListener::bind(guest_addr()).await
}

/// Carries each connection on `listener` to the host's broker port until
/// the task is dropped.
pub async fn serve(listener: TcpListener, connector: Arc<dyn GuestConnector>) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
            accepted = listener.accept() => {
                let Ok((mut client, _)) = accepted else { continue };
                let connector = connector.clone();
                conns.spawn(async move {
                    // The host listens only for runs granted a connection;
                    // otherwise the guest's connection just closes.
                    if let Ok(mut host) = connector.connect(BROKER_PORT).await {
                        // A model's answer can take minutes: waiting on it
                        // is not a hang.
                        let _open = crate::liveness::OpenConnection::count();
                        let _ = tokio::io::copy_bidirectional(&mut client, &mut host).await;
                    }
                });
            }
        }
    }
}
