//! The command line's completions and manual pages, generated from its definition.

#[test]
fn completions_and_manual_pages_come_from_the_command_line_itself() {
    seckill_testkit::shell::completions_and_manual_pages(
        env!("CARGO_BIN_EXE_seckill-sim"),
        "seckill-sim",
    );
}
