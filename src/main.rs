use std::process::ExitCode;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> ExitCode {
    traceaudit::output::remove_staging_on_signal();
    traceaudit::run_command_line(std::env::args_os())
}
