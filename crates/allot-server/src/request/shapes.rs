//! Named shapes' requests (an allot extension, issue 47): a shape named in a path,
//! the body of `PUT /shapes/{name}`, and a shape's request with a question's own
//! parameters added (`GET /headroom?shape=NAME&...`).

use allot_core::shapes::ShapeName;
use serde::Deserialize;

use super::JsonBody;
use crate::error::ApiError;
use crate::schemas;

/// The body of `PUT /shapes/{name}` as its schema checked it.
#[derive(Debug, Deserialize)]
struct Body {
    request: String,
}

/// A shape's name in a path (already percent-decoded).
pub fn name_in_path(raw: &str) -> Result<ShapeName, ApiError> {
    ShapeName::parse(raw).ok_or_else(|| {
        ApiError::bad_request(format!(
            "Invalid shape name {raw:?}: 1 to {} characters, none of them a control \
             character or '/', and not '.' or '..'.",
            ShapeName::MAX_CHARS
        ))
    })
}

/// `PUT /shapes/{name}` read: the request, without a leading `?`, checked as
/// `GET /allocation_candidates` at the newest microversion checks its query
/// string (so that every later count of the shape reads it).
pub fn read_put(body: &JsonBody) -> Result<String, ApiError> {
    let body: Body = body.read(&schemas::shape_put())?;
    let request = body.request.trim_start_matches('?').to_owned();
    check_request(&request)?;
    Ok(request)
}

/// Checks a shape's request as `GET /allocation_candidates` reads one.
pub fn check_request(request: &str) -> Result<(), ApiError> {
    let parsed = super::candidates::parse(crate::microversion::MAX, Some(request), 0, 0)
        .map_err(|e| ApiError::bad_request(format!("Invalid request: {}", e.message)))?;
    if parsed.groups.iter().all(|g| g.resources.is_empty()) {
        // A shape that asks for nothing would fit everywhere without end.
        return Err(ApiError::bad_request(
            "Invalid request: a shape asks for at least one resource.",
        ));
    }
    Ok(())
}

/// A shape's request with `more` (a query string, may be empty) after it: the
/// question's own parameters are added to the shape's, as if written after them.
pub fn with_more(request: &str, more: &str) -> String {
    match (request.is_empty(), more.is_empty()) {
        (_, true) => request.to_owned(),
        (true, false) => more.to_owned(),
        (false, false) => format!("{request}&{more}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shape_parameter_comes_out_decoded() {
        use crate::request::headroom::take_param;
        let (shape, rest) = take_param("shape=GPU%20large+%28x%29&member_of=abc", "shape").unwrap();
        assert_eq!(shape.as_deref(), Some("GPU large (x)"));
        assert_eq!(rest, "member_of=abc");
        let (shape, rest) = take_param("resources=VCPU:1", "shape").unwrap();
        assert_eq!((shape, rest.as_str()), (None, "resources=VCPU:1"));
        let e = take_param("shape=a&shape=b", "shape").unwrap_err();
        assert!(e.message.contains("only once"), "{}", e.message);
        assert_eq!(with_more("resources=VCPU:1", ""), "resources=VCPU:1");
        assert_eq!(
            with_more("resources=VCPU:1", "member_of=x"),
            "resources=VCPU:1&member_of=x"
        );
    }

    #[test]
    fn requests_are_checked_as_candidate_queries() {
        assert!(check_request("resources=VCPU:1,MEMORY_MB:512&required=HW_CPU_X86_AVX2").is_ok());
        for bad in [
            "resources=VCPU:x",
            "bogus=1",
            "required=HW_CPU_X86_AVX2",
            "",
        ] {
            let e = check_request(bad).unwrap_err();
            assert_eq!(e.status, 400, "{bad}");
        }
        assert!(name_in_path("m1.small").is_ok());
        for bad in ["a/b", ".", "..", "", "nl\n"] {
            assert_eq!(name_in_path(bad).unwrap_err().status, 400, "{bad:?}");
        }
        assert!(name_in_path("...").is_ok());
    }
}
