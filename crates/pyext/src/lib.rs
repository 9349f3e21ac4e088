//! Python binding: `pywebbench._engine`. One module of bindings per Rust crate.
use pyo3::prelude::*;

mod engine_bindings;
mod faults_bindings;
mod refserver_bindings;

#[pymodule]
fn _engine(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    engine_bindings::register(m)?;
    faults_bindings::register(m)?;
    refserver_bindings::register(m)?;
    Ok(())
}
