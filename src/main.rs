fn main() -> std::process::ExitCode {
    xrunlab::cli::main()
}
