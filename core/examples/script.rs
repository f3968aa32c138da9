//! Prints a Lua script as Redis runs it, its generated prelude and all, for the benches
//! that load a script by hand:
//!
//!     cargo run -q --release -p seckill-core --example script -- purchase.lua

fn main() {
    let Some(name) = std::env::args().nth(1) else {
        eprintln!("usage: script <file name, e.g. purchase.lua>");
        std::process::exit(2);
    };
    match seckill_core::scripts::assembled().find(|(n, _)| *n == name) {
        Some((_, src)) => print!("{src}"),
        None => {
            eprintln!("no script named {name}");
            std::process::exit(1);
        }
    }
}
