//! Server groups (an allot extension, issue 44) as the API shows them: the group,
//! and with `GET /server_groups/{uuid}` where each member is and how broken the rule
//! is, read at the moment of the answer. The bodies are `allot-client`'s types.

use std::collections::BTreeMap;

use allot_client::server_groups::{MemberPlace, Rules, ServerGroup as Body};
use allot_core::server_groups::ServerGroup;
use allot_core::{State, Timestamp};

use crate::auth::format_utc;

/// A group as every endpoint answers it; with `detail`, where its members are at
/// `now` on `view`, and its rule's number (0: the rule holds).
pub fn server_group_body(view: &State, group: &ServerGroup, now: Timestamp, detail: bool) -> Body {
    let rule = group.rule();
    let (violations, placement) = match detail {
        true => {
            let places: BTreeMap<_, _> = group
                .members
                .iter()
                .map(|m| {
                    let roots = view.member_roots(m, now);
                    let place = MemberPlace {
                        roots: roots.iter().map(|&r| view.uuid_of(r)).collect(),
                        domains: view
                            .member_domains(&rule, m, now)
                            .iter()
                            .map(ToString::to_string)
                            .collect(),
                    };
                    (*m, place)
                })
                .collect();
            let broken = view.group_broken(&rule, &group.members, now);
            (Some(broken), Some(places))
        }
        false => (None, None),
    };
    Body {
        created_at: format_utc(group.created_at),
        enforce_on_allocations: group.enforce_on_allocations,
        members: group.members.clone(),
        name: group.name.clone(),
        policy: group.policy.as_str().to_owned(),
        project_id: group.project_id.clone(),
        rules: Rules {
            max_server_per_host: group.policy.is_anti().then_some(group.max_per_domain),
        },
        scope: group.scope.to_string(),
        updated_at: format_utc(group.updated_at),
        user_id: group.user_id.clone(),
        uuid: group.uuid,
        violations,
        placement,
    }
}
