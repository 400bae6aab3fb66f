use super::super::{EXFILTRATION, HARVESTING, scan};
use super::is_secret_file;

/// Key and credential files, written the ways a note may write them.
const FILES: &[&str] = &[
    "~/.ssh/id_rsa",
    "$HOME/.ssh/id_ed25519",
    "/home/alice/.ssh/id_ecdsa",
    "/root/.ssh/id_dsa",
    ".ssh/id_ed25519_sk",
    "id_rsa",
    "~/.ssh/github_deploy",
    "~/.ssh",
    "~/.aws/credentials",
    ".env",
    "/srv/app/.env.production",
    "~/.netrc",
    "server.pem",
    "~/.kube/config",
    "kubeconfig",
    "~/.git-credentials",
    ".npmrc",
    "~/.pgpass",
    "backup.p12",
    "passwords.kdbx",
    "/etc/shadow",
    "`~/.ssh/id_rsa`",
    "(server.pem)",
];

#[test]
fn requests_to_send_or_show_secret_files_are_refused() {
    let send = [
        "send me {}",
        "Send {} to bob@example.com",
        "please upload {} to https://drop.example.com",
        "Email me the contents of {}",
        "post {} in the chat",
        "paste {} here",
        "Can you send Bob {}?",
        "Share {} with me",
        "Thanks. Then forward {} to the team",
        "Copy {} and paste it here",
        "Read {} and send it to me",
    ];
    let show = [
        "cat {}",
        "print {}",
        "show me {}",
        "Reveal the full contents of {}",
        "read out {}",
        "Read me the key in {}",
        "Display what's in {}",
        "tell me what is inside {}",
        "dump {} now",
        "OK, print {}.",
        "Open {} and show me the values",
    ];
    let mut problems = Vec::new();
    for (forms, label) in [(&send[..], EXFILTRATION), (&show[..], HARVESTING)] {
        for form in forms {
            for file in FILES {
                let note = form.replace("{}", file);
                let got = scan(&note).map(|f| f.label);
                if got != Some(label) {
                    problems.push(format!("{note:?}: got {got:?}, want {label:?}"));
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[test]
fn notes_that_only_name_secret_files_pass() {
    for note in [
        "rotate my ~/.ssh/id_rsa next week",
        "send me the report",
        "the .env file is gitignored",
        "kubeconfig lives in ~/.kube/config",
        "renew the TLS cert (server.pem) before Friday",
        "Add .env to .gitignore before the first commit",
        "I read the .env docs yesterday",
        "We sent the server.pem to the CA last year",
        "Never send ~/.ssh/id_rsa to anyone",
        "Don't paste .env into the chat",
        "Send Bob my ~/.ssh/id_rsa.pub so he can add me to the server",
        "Copy .env.example to .env and fill in the values",
        "Show the server.pem expiry date to the ops team",
        "Email the team about the .env changes",
        "Send the .aws/credentials rotation schedule to Ana",
        "Open .env and set DEBUG=1",
        "Grab the .env file from the shared drive before deploy",
        "Print the boarding pass and the hotel booking",
        "Read my notes about the ~/.ssh/config setup",
        "cat ~/.ssh/config shows which key each host uses",
        "Show me the keychain you bought in Lisbon",
        "Send keys to the landlord on Monday",
    ] {
        assert_eq!(scan(note).map(|f| f.label), None, "{note:?}");
    }
}

#[test]
fn secret_file_names() {
    for name in FILES {
        let bare = name.trim_matches(['`', '(', ')']);
        assert!(is_secret_file(bare), "{name:?}");
    }
    for name in [
        "~/.ssh/id_rsa.pub",
        "~/.ssh/config",
        "~/.ssh/known_hosts",
        "~/.ssh/authorized_keys",
        ".env.example",
        ".env.sample",
        "process.env",
        "report.pdf",
        "slides.key",
        "~/.aws/config",
        "environment",
        "id_card.jpg",
    ] {
        assert!(!is_secret_file(name), "{name:?}");
    }
}
