//! The head of an HTTP/1.x request, parsed by httparse into owned parts: what the small HTTP servers
//! (`serve --metrics`, the exporter, `serve --ndt7`) route and check on. Reading it from a socket,
//! with their own limits and timeouts, is each server's.

/// A request's method, target and headers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestHead {
    /// "GET", "POST", ...
    pub method: String,
    /// The target's path, without the query.
    pub path: String,
    /// The target's query string, as sent (not decoded).
    pub query: String,
    /// Header names (lower case) and values, in order.
    pub headers: Vec<(String, String)>,
}

impl RequestHead {
    /// Parses a complete request head (up to and including the blank line); None if it is not one.
    pub fn parse(head: &[u8]) -> Option<RequestHead> {
        let mut headers = [httparse::EMPTY_HEADER; 64];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(head) {
            Ok(httparse::Status::Complete(_)) => {}
            _ => return None,
        }
        let target = req.path.unwrap_or("/");
        let (path, query) = target.split_once('?').unwrap_or((target, ""));
        Some(RequestHead {
            method: req.method.unwrap_or("").to_string(),
            path: path.to_string(),
            query: query.to_string(),
            headers: req
                .headers
                .iter()
                .map(|h| {
                    (
                        h.name.to_ascii_lowercase(),
                        String::from_utf8_lossy(h.value).into_owned(),
                    )
                })
                .collect(),
        })
    }

    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Whether header `name` lists `token` (comma-separated, any case, over every line of it).
    pub fn lists(&self, name: &str, token: &str) -> bool {
        self.headers
            .iter()
            .filter(|(n, _)| n == name)
            .flat_map(|(_, v)| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn heads_split_target_and_lower_case_header_names() {
        let h = RequestHead::parse(
            b"GET /ndt/v7/download?a=1&b HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, Upgrade\r\n\
              connection: close\r\n\r\n",
        )
        .unwrap();
        assert_eq!(
            (h.method.as_str(), h.path.as_str(), h.query.as_str()),
            ("GET", "/ndt/v7/download", "a=1&b")
        );
        assert_eq!(h.header("host"), Some("x"));
        assert!(h.lists("connection", "upgrade") && h.lists("connection", "CLOSE"));
        assert!(!h.lists("connection", "keep"));
        assert!(
            RequestHead::parse(b"GET / HTTP/1.1\r\nHost: x\r\n").is_none(),
            "incomplete"
        );
        assert!(RequestHead::parse(b"\x16\x03\x01garbage\r\n\r\n").is_none());
    }
}
