//! Outbound connections for allowed egress.
//!
//! Owns the [`Dial`] seam: the forwarder reaches the network only through
//! it, so tests can prove that a denied connection was never dialled.
//!
//! Must never be called before the gate allowed the destination; it does
//! no policy checks of its own.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

use async_trait::async_trait;
use tokio::net::TcpStream;

/// Opens a TCP connection to an allowed destination.
#[async_trait]
pub trait Dial: Send + Sync + fmt::Debug {
    async fn dial(&self, addr: SocketAddr) -> io::Result<TcpStream>;
}

/// Plain TCP with a connect deadline.
#[derive(Debug, Clone, Copy)]
pub struct TcpDialer {
    pub connect_timeout: Duration,
}

impl Default for TcpDialer {
    fn default() -> Self {
        TcpDialer { connect_timeout: Duration::from_secs(10) }
    }
}

#[async_trait]
impl Dial for TcpDialer {
    async fn dial(&self, addr: SocketAddr) -> io::Result<TcpStream> {
        let stream =
            tokio::time::timeout(self.connect_timeout, TcpStream::connect(addr)).await.map_err(|_| {
                io::Error::new(io::ErrorKind::TimedOut, format!("connecting to {addr} timed out"))
            })??;
        // Interactive protocols (TLS handshakes, registry API calls) suffer
        // from Nagle on top of the guest's own stack.
        stream.set_nodelay(true)?;
        Ok(stream)
    }
}
