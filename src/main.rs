fn main() -> std::process::ExitCode {
    almanac::cli::main()
}
