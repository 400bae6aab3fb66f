use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A temporary home directory and a way to run `almanac` inside it.
pub struct Sandbox {
    pub dir: tempfile::TempDir,
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not JSON ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    #[track_caller]
    pub fn ok(self) -> Self {
        assert_eq!(
            self.code, 0,
            "expected success\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }

    #[track_caller]
    pub fn code(self, code: i32) -> Self {
        assert_eq!(
            self.code, code,
            "unexpected exit code\nstdout:\n{}\nstderr:\n{}",
            self.stdout, self.stderr
        );
        self
    }
}

impl From<Output> for Run {
    fn from(out: Output) -> Run {
        Run {
            code: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

impl Sandbox {
    pub fn new() -> Sandbox {
        Sandbox {
            dir: tempfile::tempdir().unwrap(),
        }
    }

    pub fn home(&self) -> &Path {
        self.dir.path()
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.home().join(rel)
    }

    /// `almanac` with only HOME, PATH and TZ set.
    pub fn cmd(&self) -> Command {
        self.command(env!("CARGO_BIN_EXE_almanac"))
    }

    /// `sh` in the same clean environment.
    pub fn sh(&self) -> Command {
        self.command("sh")
    }

    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(program);
        cmd.env_clear()
            .env("HOME", self.home())
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("TZ", "UTC")
            .current_dir(self.home());
        cmd
    }

    pub fn run(&self, args: &[&str]) -> Run {
        self.cmd().args(args).output().unwrap().into()
    }

    pub fn run_env(&self, args: &[&str], env: &[(&str, &str)]) -> Run {
        let mut cmd = self.cmd();
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.args(args).output().unwrap().into()
    }

    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.path(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
        path
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path(rel)).unwrap()
    }
}

pub fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

/// A planted fact and where it is.
pub struct Needle {
    pub query: &'static str,
    pub path: String,
    pub line: usize,
    pub text: &'static str,
}

/// Writes a deterministic synthetic memory (like bench's generator): `days`
/// daily files ending 2026-11-28 with `lines` notes each, and five needles
/// spread over the range (the first on the oldest day).
pub fn synthetic_memory(root: &Path, days: usize, lines: usize) -> Vec<Needle> {
    const SUBJECTS: &[&str] = &[
        "standup",
        "deploy",
        "invoice",
        "dentist",
        "flight",
        "groceries",
        "gym",
        "backup",
        "review",
        "budget",
    ];
    const PEOPLE: &[&str] = &[
        "Alice", "Bob", "Carol", "Dmitri", "Elena", "Farid", "Grace", "Hiro",
    ];
    const VERBS: &[&str] = &[
        "moved",
        "booked",
        "cancelled",
        "discussed",
        "finished",
        "postponed",
        "paid",
        "planned",
    ];
    const CJK: &[&str] = &[
        "周会改到周三上午",
        "记得给妈妈打电话",
        "服务器迁移完成",
        "预约了牙医",
        "项目评审通过",
    ];
    const NEEDLES: &[(&str, &str)] = &[
        (
            "Zephyrine Labs badge number",
            "badge number for Zephyrine Labs is ZL-48213",
        ),
        ("storage unit gate code", "storage unit gate code is 7719#"),
        (
            "Pistachio Marmalade recipe",
            "Pistachio Marmalade recipe: 300g pistachios, 2 oranges",
        ),
        (
            "Quillfeather hotel confirmation",
            "Quillfeather hotel confirmation QF-5521 for the Lisbon trip",
        ),
        ("牙医 预约 时间", "牙医预约时间是下午三点半"),
    ];
    let end = jiff::civil::date(2026, 11, 28);
    let start = end
        .checked_sub(jiff::Span::new().days(days as i64 - 1))
        .unwrap();
    let spots = [0, days / 3, 2 * days / 3, days.saturating_sub(5), days / 2];
    let mut seed: u64 = 42;
    let mut rand = move |n: usize| {
        seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((seed >> 33) as usize) % n
    };
    std::fs::create_dir_all(root.join("memory")).unwrap();
    let mut needles = Vec::new();
    for day in 0..days {
        let date = start
            .checked_add(jiff::Span::new().days(day as i64))
            .unwrap();
        let mut out = vec![format!("# {date}"), String::new()];
        for i in 0..lines {
            let minute = 8 * 60 + i * (600 / lines.max(1));
            let stamp = format!("{date} {:02}:{:02}", minute / 60, minute % 60);
            let text = if rand(20) == 0 {
                CJK[rand(CJK.len())].to_string()
            } else {
                format!(
                    "{} {} the {} (#{})",
                    PEOPLE[rand(PEOPLE.len())],
                    VERBS[rand(VERBS.len())],
                    SUBJECTS[rand(SUBJECTS.len())],
                    rand(10_000)
                )
            };
            out.push(format!("- [{stamp}] {text}"));
        }
        for ((query, fact), spot) in NEEDLES.iter().zip(spots) {
            if spot == day {
                out.push(format!("- [{date} 18:30] {fact}"));
                needles.push(Needle {
                    query,
                    path: format!("memory/{date}.md"),
                    line: out.len(),
                    text: fact,
                });
            }
        }
        std::fs::write(
            root.join(format!("memory/{date}.md")),
            out.join("\n") + "\n",
        )
        .unwrap();
    }
    std::fs::write(
        root.join("MEMORY.md"),
        "# Long-term memory\n\n- Prefers morning standups at 9am\n- Always use dark terminal theme\n",
    )
    .unwrap();
    needles
}
