//! The responsiveness server's HTTP answers: what every handler returns, and a plain-text one for
//! refusals and errors.

use http_body_util::{combinators::BoxBody, BodyExt, Full};
use hyper::body::Bytes;
use hyper::{Response, StatusCode};
use std::convert::Infallible;

/// An HTTP answer with a boxed body.
pub(crate) type Answer = Response<BoxBody<Bytes, Infallible>>;

/// A plain-text answer with `status`.
pub(crate) fn plain(status: StatusCode, text: &str) -> Answer {
    let mut r = Response::new(Full::new(Bytes::from(text.to_owned())).boxed());
    *r.status_mut() = status;
    r
}
