//! `allot policy list`: every authorization rule with the check in force, the policy
//! file's where it names the rule, else the built-in default of the mode, so that an
//! operator can see what a file changes before a server runs with it.

use std::path::PathBuf;

use clap::{Args, Subcommand};

use crate::config::Policy;

#[derive(Args, Debug)]
pub struct PolicyArgs {
    #[command(subcommand)]
    command: PolicyCommand,
}

#[derive(Subcommand, Debug)]
enum PolicyCommand {
    /// Print every rule name with its effective check, as policy-file lines.
    List {
        /// The policy file to apply (ALLOT_POLICY_FILE) [default: none].
        #[arg(long, env = "ALLOT_POLICY_FILE", value_name = "FILE")]
        policy_file: Option<PathBuf>,
        /// The mode whose defaults apply where the file is silent (ALLOT_POLICY)
        /// [default: secure].
        #[arg(long, env = "ALLOT_POLICY", value_enum, value_name = "MODE")]
        policy: Option<Policy>,
    },
}

pub fn run(args: PolicyArgs) -> anyhow::Result<()> {
    let PolicyCommand::List {
        policy_file,
        policy,
    } = args.command;
    let mode: allot_server::PolicyMode = policy.unwrap_or(crate::config::DEFAULT_POLICY).into();
    let rules = match policy_file.filter(|p| !p.as_os_str().is_empty()) {
        Some(path) => Some(
            allot_server::policy_file::PolicyFile::open(&path)
                .map_err(|e| anyhow::anyhow!(e))?
                .current(),
        ),
        None => None,
    };
    print!("{}", listing(mode, rules.as_deref()));
    Ok(())
}

/// The listing: one `"name": "check"` line a rule, the built-in ones in Placement's
/// order then the file's own aliases, each with a comment saying where it comes from.
fn listing(
    mode: allot_server::PolicyMode,
    rules: Option<&allot_server::policy_file::Rules>,
) -> String {
    let quote = |s: &str| serde_json::to_string(s).unwrap_or_default();
    let mut out = String::new();
    let mut line = |name: &str, check: &str, whence: &str| {
        out.push_str(&format!("{}: {}  # {whence}\n", quote(name), quote(check)));
    };
    let mode_name = format!("{mode:?}").to_ascii_lowercase();
    for name in allot_server::policy::builtin_rule_names() {
        match rules.and_then(|r| r.text(name)) {
            Some(text) => line(name, text, "policy file"),
            None => {
                let (check, project_only) =
                    allot_server::policy::describe_builtin(mode, name).unwrap_or_default();
                // The scope is not part of the check; it goes in the comment.
                let scope = if project_only {
                    " (project-scoped tokens only)"
                } else {
                    ""
                };
                line(name, &check, &format!("built-in, {mode_name}{scope}"));
            }
        }
    }
    if let Some(rules) = rules {
        for name in rules.names() {
            if !allot_server::policy::is_builtin_rule(name) {
                let text = rules.text(name).unwrap_or_default();
                line(name, text, "policy file, not a built-in rule");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use allot_server::PolicyMode;

    #[test]
    fn the_file_wins_where_it_speaks() {
        let rules = allot_server::policy_file::parse_rules(
            "\"placement:resource_providers:list\": \"role:reader or role:admin\"\n\
             \"readers\": \"role:reader\"\n",
        )
        .unwrap();
        let out = listing(PolicyMode::Secure, Some(&rules));
        assert!(out.contains(
            "\"placement:resource_providers:list\": \"role:reader or role:admin\"  # policy file\n"
        ));
        assert!(out.contains(
            "\"placement:resource_providers:create\": \"rule:admin_or_service_api\"  \
             # built-in, secure (project-scoped tokens only)\n"
        ));
        assert!(out.contains("\"admin_api\": \"role:admin\""));
        assert!(out.ends_with("\"readers\": \"role:reader\"  # policy file, not a built-in rule\n"));
        let open = listing(PolicyMode::Open, None);
        assert!(open.contains("\"placement:traits:list\": \"@\""));
        assert_eq!(open.lines().count(), 65);
    }
}
