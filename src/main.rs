#![warn(clippy::too_many_lines)]

fn main() -> std::process::ExitCode {
    almanac::cli::main()
}
