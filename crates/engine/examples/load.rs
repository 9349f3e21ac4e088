//! Run one load spec given as JSON and print the result JSON (development aid):
//! `cargo run --release -p pywebbench-engine --example load -- '{"url": "http://127.0.0.1:8080/", "duration_s": 2}'`
fn main() {
    let arg = std::env::args().nth(1).unwrap_or_else(|| {
        eprintln!("usage: load '<spec json>'");
        std::process::exit(2)
    });
    let spec: pywebbench_engine::LoadSpec = serde_json::from_str(&arg).unwrap_or_else(|e| {
        eprintln!("bad spec: {e}");
        std::process::exit(2)
    });
    match pywebbench_engine::run(&spec) {
        Ok(r) => println!("{}", r.to_json()),
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1)
        }
    }
}
