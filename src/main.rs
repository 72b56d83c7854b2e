fn main() -> std::process::ExitCode {
    bluetape_flow::cli::main()
}
