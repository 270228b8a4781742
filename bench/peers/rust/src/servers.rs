//! Servers of bench/run.py's server groups (bench/peers/README.md, "Server groups"):
//!
//!   peer --serve <kind> <method>   listens on 127.0.0.1 (a port the kernel picks), prints
//!                                  "listening on 127.0.0.1:PORT" and serves until killed
//!
//! bench/loadgen (echo, sync_over_async_server) or wrk (plaintext) is the client. Written as a
//! tokio user would: the multi-thread runtime, a spawned task per connection, hyper for HTTP.
use std::convert::Infallible;
use std::future::Future;
use std::io::Write;
use std::time::Duration;

use http_body_util::Full;
use hyper::body::Bytes;
use hyper::header::{HeaderValue, CONTENT_TYPE, SERVER};
use hyper::{Request, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::BoxFut;

/// A request of the sync_over_async_server group: a fixed-size message echoed back; one whose
/// first byte is 'B' is answered only after the handler has waited BLOCKING_HANDLER_WAIT.
const FRAMED_MESSAGE_SIZE: usize = 64;
const BLOCKING_HANDLER_WAIT: Duration = Duration::from_millis(100);

pub struct Server {
    pub kind: &'static str,
    pub name: &'static str,
    serve: fn(TcpListener) -> BoxFut<()>,
}

async fn accept_loop<F, Fut>(listener: TcpListener, handle: F)
where
    F: Fn(TcpStream) -> Fut,
    Fut: Future<Output = ()> + Send + 'static,
{
    loop {
        if let Ok((stream, _)) = listener.accept().await {
            let _ = stream.set_nodelay(true);
            tokio::spawn(handle(stream));
        }
    }
}

async fn echo(mut stream: TcpStream) {
    let mut buf = vec![0u8; 4096];
    loop {
        let n = match stream.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if stream.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// A 'B' message blocks the handler in a synchronous wait for a timer, inside block_in_place
/// (tokio's advice for blocking in async code: the worker's other tasks move to another thread).
async fn blocking_echo(mut stream: TcpStream) {
    let mut buf = [0u8; FRAMED_MESSAGE_SIZE];
    loop {
        if stream.read_exact(&mut buf).await.is_err() {
            return;
        }
        if buf[0] == b'B' {
            tokio::task::block_in_place(|| {
                tokio::runtime::Handle::current().block_on(tokio::time::sleep(BLOCKING_HANDLER_WAIT))
            });
        }
        if stream.write_all(&buf).await.is_err() {
            return;
        }
    }
}

async fn hello(_: Request<hyper::body::Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let mut response = Response::new(Full::new(Bytes::from_static(b"Hello, World!")));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain"));
    response.headers_mut().insert(SERVER, HeaderValue::from_static("hyper"));
    Ok(response)
}

async fn http_connection(stream: TcpStream) {
    let _ = hyper::server::conn::http1::Builder::new()
        .serve_connection(hyper_util::rt::TokioIo::new(stream), hyper::service::service_fn(hello))
        .await;
}

pub fn servers() -> Vec<Server> {
    vec![
        Server { kind: "echo", name: "task per connection (tokio::net)", serve: |l| Box::pin(accept_loop(l, echo)) },
        Server { kind: "plaintext", name: "hyper 1 http1, task per connection", serve: |l| Box::pin(accept_loop(l, http_connection)) },
        Server {
            kind: "sync_over_async_server",
            name: "task per connection, block_in_place(block_on(sleep(100 ms)))",
            serve: |l| Box::pin(accept_loop(l, blocking_echo)),
        },
    ]
}

pub fn serve(kind: &str, name: &str) -> ! {
    let Some(server) = servers().into_iter().find(|s| s.kind == kind && s.name == name) else {
        eprintln!("no server {kind:?} / {name:?}");
        std::process::exit(2);
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async move {
        let listener = match TcpListener::bind("127.0.0.1:0").await {
            Ok(l) => l,
            Err(e) => {
                eprintln!("listen: {e}");
                std::process::exit(1);
            }
        };
        println!("listening on {}", listener.local_addr().unwrap());
        let _ = std::io::stdout().flush();
        (server.serve)(listener).await
    });
    std::process::exit(0);
}
