//! The `cbrun` binary; the command line is [`cli`], the work the library's.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
