//! The attacker's collector: an HTTP server that records every request it
//! receives and answers `200 ok`. Injections send the agent here; a
//! contained goal leaves it empty. The same server, given pages, is the
//! upstream of the broker's `notes` connection: it answers each page's path
//! with its text.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::{Request, Response};
use tokio::net::TcpListener;

/// One request the collector received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hit {
    /// The method.
    pub method: String,
    /// The request target (path and query).
    pub target: String,
    /// The body's first 4 KiB, lossily as text.
    pub body: String,
}

/// A running collector; it stops when dropped.
#[derive(Debug)]
pub struct Collector {
    addr: SocketAddr,
    hits: Arc<Mutex<Vec<Hit>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Collector {
    /// Binds `addr` once (port 0 for any) and serves until dropped.
    pub async fn start(addr: SocketAddr) -> std::io::Result<Collector> {
        Collector::serving(addr, BTreeMap::new()).await
    }

    /// The same, answering a request for one of `pages` (by path) with its
    /// text.
    pub async fn serving(addr: SocketAddr, pages: BTreeMap<String, String>) -> std::io::Result<Collector> {
        let pages = Arc::new(pages);
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let hits = Arc::new(Mutex::new(Vec::new()));
        let task = tokio::spawn({
            let hits = Arc::clone(&hits);
            async move {
                while let Ok((stream, _)) = listener.accept().await {
                    let (hits, pages) = (Arc::clone(&hits), Arc::clone(&pages));
                    tokio::spawn(async move {
                        let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                            let (hits, pages) = (Arc::clone(&hits), Arc::clone(&pages));
                            async move {
                                let page = pages.get(req.uri().path()).cloned();
                                let method = req.method().to_string();
                                let target =
                                    req.uri().path_and_query().map(|p| p.to_string()).unwrap_or_default();
                                let body =
                                    req.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
                                let body =
                                    String::from_utf8_lossy(&body[..body.len().min(4096)]).into_owned();
                                if let Ok(mut h) = hits.lock() {
                                    h.push(Hit { method, target, body });
                                }
                                let answer =
                                    page.map(Bytes::from).unwrap_or_else(|| Bytes::from_static(b"ok\n"));
                                Ok::<_, std::convert::Infallible>(Response::new(Full::new(answer)))
                            }
                        });
                        let io = hyper_util::rt::TokioIo::new(stream);
                        let _ =
                            hyper::server::conn::http1::Builder::new().serve_connection(io, service).await;
                    });
                }
            }
        });
        Ok(Collector { addr, hits, task })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every request so far, in arrival order.
    pub fn hits(&self) -> Vec<Hit> {
        self.hits.lock().map(|h| h.clone()).unwrap_or_default()
    }

    /// The requests whose target starts with `/<case>` (the placeholder
    /// convention: attacks address `http://{{sink}}/{{case}}/…`).
    pub fn hits_for(&self, case: &str) -> Vec<Hit> {
        let prefix = format!("/{case}");
        self.hits()
            .into_iter()
            .filter(|h| {
                h.target == prefix
                    || h.target.starts_with(&format!("{prefix}/"))
                    || h.target.starts_with(&format!("{prefix}?"))
            })
            .collect()
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn it_records_what_it_receives_by_case() {
        let c = Collector::start(SocketAddr::from(([127, 0, 0, 1], 0))).await.expect("bind");
        let mut s = tokio::net::TcpStream::connect(c.addr()).await.expect("connect");
        use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
        s.write_all(b"POST /case-a/capability HTTP/1.1\r\nhost: x\r\ncontent-length: 5\r\nconnection: close\r\n\r\nhello")
            .await
            .expect("write");
        let mut answer = String::new();
        s.read_to_string(&mut answer).await.expect("read");
        assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
        assert_eq!(
            c.hits_for("case-a"),
            vec![Hit { method: "POST".into(), target: "/case-a/capability".into(), body: "hello".into() }]
        );
        assert!(c.hits_for("case").is_empty());
    }
}
