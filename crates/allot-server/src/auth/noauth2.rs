//! Placement's `noauth2` test mode: the caller is whoever it says it is. The token
//! is `USER[:PROJECT]` (`admin` gets the admin role), `X-Roles` lists roles,
//! `X-Project-Id` overrides the project and `OpenStack-System-Scope` makes the
//! request system-scoped. Only for tests and loopback: `allot serve` refuses it on
//! any other address unless told `--insecure-noauth`.

use axum::http::HeaderMap;

use super::{text_header, token_header, AuthError, AuthFuture, Authenticator, Identity};

/// The `noauth2` authenticator.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoAuth2;

impl Authenticator for NoAuth2 {
    fn authenticate<'a>(&'a self, headers: &'a HeaderMap) -> AuthFuture<'a> {
        Box::pin(std::future::ready(identity(headers)))
    }

    fn challenge(&self) -> &str {
        // There is no identity service to point at; the realm says what to send.
        "Keystone uri=\"noauth2\", realm=\"allot noauth2: send X-Auth-Token: USER[:PROJECT]\""
    }

    fn mode(&self) -> &'static str {
        "noauth2"
    }
}

/// Parses the caller's identity from `noauth2` headers.
fn identity(headers: &HeaderMap) -> Result<Identity, AuthError> {
    let token = token_header(headers)?;
    let (user, project) = match token.split_once(':') {
        Some((u, p)) => (u.to_owned(), p.to_owned()),
        None => (token.to_owned(), token.to_owned()),
    };
    let roles = match text_header(headers, "x-roles")? {
        Some(r) => r
            .split(',')
            .map(|s| s.trim().to_owned())
            .filter(|s| !s.is_empty())
            .collect(),
        None if user == "admin" => vec!["admin".to_owned()],
        None => vec![],
    };
    // Keystone only issues `all`, but Placement treats any value as system scope,
    // under which the token's project is dropped (an explicit `x-project-id` stays).
    let system_scope =
        text_header(headers, "openstack-system-scope")?.is_some_and(|s| !s.is_empty());
    let project_id = text_header(headers, "x-project-id")?
        .map(str::to_owned)
        .or((!system_scope).then_some(project));
    Ok(Identity {
        user_id: user,
        project_id,
        roles,
        system_scope,
        ..Identity::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_static(v));
        }
        h
    }

    /// Headers in, then the expected user, project, roles and system scope.
    type IdentityCase<'a> = (
        &'a [(&'a str, &'a str)],
        &'a str,
        Option<&'a str>,
        &'a [&'a str],
        bool,
    );

    #[test]
    fn noauth2_identities() {
        let cases: &[IdentityCase] = &[
            (
                &[("x-auth-token", "admin")],
                "admin",
                Some("admin"),
                &["admin"],
                false,
            ),
            (
                &[("x-auth-token", "user")],
                "user",
                Some("user"),
                &[],
                false,
            ),
            (&[("x-auth-token", "u:p")], "u", Some("p"), &[], false),
            (
                &[("x-auth-token", "admin"), ("x-roles", "reader, member")],
                "admin",
                Some("admin"),
                &["reader", "member"],
                false,
            ),
            (
                &[("x-auth-token", "user"), ("x-project-id", "proj")],
                "user",
                Some("proj"),
                &[],
                false,
            ),
            (
                &[
                    ("x-auth-token", "user"),
                    ("x-roles", "admin,member,reader"),
                    ("openstack-system-scope", "all"),
                ],
                "user",
                None,
                &["admin", "member", "reader"],
                true,
            ),
            (
                &[("x-auth-token", "user"), ("openstack-system-scope", "")],
                "user",
                Some("user"),
                &[],
                false,
            ),
        ];
        for (pairs, user, project, roles, system) in cases {
            let id = identity(&headers(pairs)).expect("a token was sent");
            assert_eq!(id.user_id, *user, "{pairs:?}");
            assert_eq!(id.project_id.as_deref(), *project, "{pairs:?}");
            assert_eq!(id.roles, *roles, "{pairs:?}");
            assert_eq!(id.system_scope, *system, "{pairs:?}");
        }
        assert_eq!(
            identity(&headers(&[("x-roles", "admin")])).unwrap_err(),
            AuthError::Missing
        );
        let mut bad = headers(&[("x-auth-token", "admin")]);
        bad.insert("x-roles", HeaderValue::from_bytes(b"adm\xffin").unwrap());
        assert!(matches!(identity(&bad), Err(AuthError::BadHeader(_))));
    }
}
