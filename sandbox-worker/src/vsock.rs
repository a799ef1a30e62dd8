//! The host end of the guest control channel: a Firecracker-style hybrid
//! vsock. The VMM (Firecracker itself, or `vhost-device-vsock` for QEMU)
//! exposes the guest's vsock as a Unix socket; a host connection writes
//! `CONNECT <port>\n`, waits for `OK <port>\n`, and from then on talks to
//! the guest listener on that port.
//!
//! Over that stream runs tonic's gRPC client for [`GuestControl`]. The
//! channel never leaves the host: nothing here opens a network socket.
//!
//! [`GuestControl`]: patchpilot_proto::v1::guest_control_client::GuestControlClient

use std::path::{Path, PathBuf};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use patchpilot_proto::v1::guest_control_client::GuestControlClient;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tonic::transport::{Channel, Endpoint};

pub use patchpilot_sandbox_wire::vsock::CONTROL_PORT;

/// What can go wrong reaching the guest.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The socket could not be reached or the handshake broke.
    #[error("vsock {path}")]
    Io {
        /// The hybrid-vsock socket.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The VMM answered the handshake with something other than `OK`.
    #[error("vsock {path}: port {port} refused the connection ({answer:?})")]
    Refused {
        /// The hybrid-vsock socket.
        path: PathBuf,
        /// The guest port.
        port: u32,
        /// What came back instead of `OK <port>`.
        answer: String,
    },
    /// tonic could not set the channel up.
    #[error("gRPC channel over vsock")]
    Channel(#[from] tonic::transport::Error),
}

/// Connects to guest `port` through the hybrid vsock at `path`.
pub async fn connect(path: &Path, port: u32) -> Result<UnixStream, Error> {
    let io_err = |source| Error::Io { path: path.to_owned(), source };
    let mut stream = UnixStream::connect(path).await.map_err(io_err)?;
    stream.write_all(format!("CONNECT {port}\n").as_bytes()).await.map_err(io_err)?;
    // Read the answer byte by byte: whatever follows the newline already
    // belongs to the guest's protocol and must stay in the stream.
    let mut answer = Vec::with_capacity(16);
    let mut byte = [0u8; 1];
    loop {
        let n = tokio::io::AsyncReadExt::read(&mut stream, &mut byte).await.map_err(io_err)?;
        if n == 0 || byte[0] == b'\n' || answer.len() > 64 {
            break;
        }
        answer.push(byte[0]);
    }
    let answer = String::from_utf8_lossy(&answer).into_owned();
    if !answer.starts_with("OK ") {
        return Err(Error::Refused { path: path.to_owned(), port, answer });
    }
    Ok(stream)
}

/// A gRPC client for the guest agent over the hybrid vsock at `path`.
/// Every reconnect tonic makes goes through the same handshake.
pub async fn control_client(path: &Path) -> Result<GuestControlClient<Channel>, Error> {
    let path = path.to_owned();
    // The URI is required by the API and never dialled: the connector below
    // decides where bytes go.
    let channel = Endpoint::from_static("http://guest.vsock")
        .connect_timeout(Duration::from_secs(5))
        .connect_with_connector(tower::service_fn(move |_| {
            let path = path.clone();
            async move { connect(&path, CONTROL_PORT).await.map(TokioIo::new) }
        }))
        .await?;
    Ok(GuestControlClient::new(channel).max_decoding_message_size(8 << 20))
}

/// A helper for tests and the guest agent's own tests: answers the
/// hybrid-vsock handshake on a Unix socket and hands the stream on.
pub async fn accept_handshake(stream: &mut UnixStream) -> std::io::Result<u32> {
    let mut reader = BufReader::new(&mut *stream);
    let mut line = String::new();
    reader.read_line(&mut line).await?;
    let port = line.trim().strip_prefix("CONNECT ").and_then(|p| p.parse::<u32>().ok()).ok_or_else(|| {
        std::io::Error::new(std::io::ErrorKind::InvalidData, format!("bad handshake {line:?}"))
    })?;
    stream.write_all(format!("OK {port}\n").as_bytes()).await?;
    Ok(port)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;
    use tokio::net::UnixListener;

    #[tokio::test]
    async fn handshake_keeps_bytes_after_the_ok_line() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("vm.vsock");
        let listener = UnixListener::bind(&path).expect("bind");
        let server = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            let mut line = Vec::new();
            let mut b = [0u8; 1];
            while s.read(&mut b).await.expect("read") == 1 && b[0] != b'\n' {
                line.push(b[0]);
            }
            assert_eq!(line, b"CONNECT 1024");
            // The answer and the first guest bytes in one write.
            s.write_all(b"OK 1024\nhello").await.expect("write");
        });
        let mut stream = connect(&path, CONTROL_PORT).await.expect("connect");
        let mut buf = [0u8; 5];
        stream.read_exact(&mut buf).await.expect("read");
        assert_eq!(&buf, b"hello");
        server.await.expect("server");
    }

    #[tokio::test]
    async fn a_refusal_names_the_port_and_answer() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("vm.vsock");
        let listener = UnixListener::bind(&path).expect("bind");
        tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.expect("accept");
            let mut b = [0u8; 64];
            let _ = s.read(&mut b).await;
            let _ = s.write_all(b"ERR no listener\n").await;
        });
        let err = connect(&path, 7).await.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.contains("port 7") && err.contains("ERR no listener"), "{err}");
    }
}
