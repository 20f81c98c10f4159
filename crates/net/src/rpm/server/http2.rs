//! The responsiveness server's HTTP/2, on the h2 crate directly rather than through hyper: hyper
//! fixes a connection's receive window or lets its own estimate grow it, and neither holds an
//! uploading client's buffered data near draft-09's 5 ms (`window`). Here the connection's loop
//! accepts streams and, every span, sets the window (`SETTINGS_INITIAL_WINDOW_SIZE`, which applies to
//! open streams too, and the connection's) from the connection's rate and the kernel's round trip.
//! Each stream's request goes to the same handler as HTTP/1.1's (its body wrapped as an
//! `http_body::Body` that returns flow-control capacity as it is read), and its answer's body is
//! written as the stream's capacity allows, so a body waits for the client and a reset ends it.

use super::answer::Answer;
use super::window::{RecvWindow, FLOOR};
use crate::rpm::backlog::Budget;
use http_body_util::BodyExt;
use hyper::body::{Body, Bytes, Frame};
use hyper::{Request, Response};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};

/// How often the loop looks at the window (it moves at most once a round trip, `window`).
const TICK: Duration = Duration::from_millis(10);
/// A request's header block at most (hyper's server default).
const MAX_HEADER_LIST: u32 = 16 * 1024;

/// A stream's request body: the client's DATA frames, each one's flow-control capacity returned to
/// the client as it is read (so the window bounds what the client has sent and this server has
/// not yet read).
///
/// While no frame is waiting it also asks h2, every `NUDGE`, whether the stream's WINDOW_UPDATE is
/// due. h2 (0.4) asks only when capacity is released: a smaller `SETTINGS_INITIAL_WINDOW_SIZE`
/// (this server's first, and each the window loop sends) takes effect when the client acknowledges
/// it, and a client that had already sent more than the new window (it may send 64 KiB before it
/// reads the server's first SETTINGS) then waits for an update that h2 never queues: the upload
/// stalled for good (seen in CI: 18 KB in 5 s; nghttp2 had the same fault, its #1679).
pub(crate) struct RecvBody {
    stream: h2::RecvStream,
    nudge: Pin<Box<tokio::time::Sleep>>,
}

/// How often an idle request body asks whether its window update is due.
const NUDGE: Duration = Duration::from_millis(20);

impl RecvBody {
    fn new(stream: h2::RecvStream) -> RecvBody {
        RecvBody {
            stream,
            nudge: Box::pin(tokio::time::sleep(NUDGE)),
        }
    }

    /// Releasing nothing has h2 check the stream's window (and queue its update when it is due),
    /// each time the nudge's timer has run out; then the timer is set again.
    fn poll_nudge(&mut self, cx: &mut Context<'_>) {
        while self.nudge.as_mut().poll(cx).is_ready() {
            let _ = self.stream.flow_control().release_capacity(0);
            let next = tokio::time::Instant::now() + NUDGE;
            self.nudge.as_mut().reset(next);
        }
    }
}

impl Body for RecvBody {
    type Data = Bytes;
    type Error = h2::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, h2::Error>>> {
        match self.stream.poll_data(cx) {
            Poll::Ready(Some(Ok(data))) => {
                let _ = self.stream.flow_control().release_capacity(data.len());
                Poll::Ready(Some(Ok(Frame::data(data))))
            }
            Poll::Ready(Some(Err(e))) => Poll::Ready(Some(Err(e))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => {
                self.poll_nudge(cx);
                Poll::Pending
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.stream.is_end_stream()
    }
}

/// Serves one HTTP/2 connection (its preface next on `io`) until it closes: `answer` answers each
/// request, and the receive window follows the connection's `budget` (its rate and round trip).
pub(crate) async fn serve<T, F, Fut>(io: T, budget: Arc<Budget>, answer: F)
where
    T: AsyncRead + AsyncWrite + Unpin,
    F: Fn(Request<RecvBody>) -> Fut,
    Fut: Future<Output = Answer> + Send + 'static,
{
    let mut window = RecvWindow::default();
    let handshake = h2::server::Builder::new()
        .initial_window_size(FLOOR)
        .initial_connection_window_size(window.connection_window())
        .max_concurrent_streams(super::MAX_STREAMS)
        .max_send_buffer_size(super::STREAM_SEND_BUF)
        .max_header_list_size(MAX_HEADER_LIST)
        .handshake::<_, Bytes>(io)
        .await;
    let Ok(mut conn) = handshake else { return };
    let mut tick = tokio::time::interval(TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            next = conn.accept() => match next {
                Some(Ok((req, respond))) => {
                    let answered = answer(req.map(RecvBody::new));
                    tokio::spawn(async move { send(answered.await, respond).await });
                }
                _ => return,
            },
            _ = tick.tick() => {
                let now = std::time::Instant::now();
                if let Some(w) = window.next(now, budget.received(), budget.rtt()) {
                    if conn.set_initial_window_size(w).is_ok() {
                        conn.set_target_window_size(window.connection_window());
                    } else {
                        window.refused();
                    }
                }
            }
        }
    }
}

/// Sends `answer` on its stream: the head, then its body's frames as the stream's capacity allows
/// (one asked for at a time, as hyper does: the body's own pacing then sets the rate), until the
/// body ends or the client resets the stream.
async fn send(answer: Answer, mut respond: h2::server::SendResponse<Bytes>) {
    let (parts, mut body) = answer.into_parts();
    let end = body.is_end_stream();
    let Ok(mut stream) = respond.send_response(Response::from_parts(parts, ()), end) else {
        return;
    };
    if end {
        return;
    }
    loop {
        stream.reserve_capacity(1);
        if stream.capacity() == 0 {
            match std::future::poll_fn(|cx| stream.poll_capacity(cx)).await {
                Some(Ok(_)) => continue,
                _ => return,
            }
        }
        let frame = tokio::select! {
            f = body.frame() => f,
            _ = std::future::poll_fn(|cx| stream.poll_reset(cx)) => return,
        };
        match frame {
            Some(Ok(f)) => {
                // The body's last data goes with END_STREAM (a probe's one byte is one frame, and
                // its end waits for no more flow-control capacity).
                let last = body.is_end_stream();
                if let Ok(data) = f.into_data() {
                    if stream.send_data(data, last).is_err() || last {
                        return;
                    }
                }
            }
            Some(Err(never)) => match never {},
            None => {
                let _ = stream.send_data(Bytes::new(), true);
                return;
            }
        }
    }
}
