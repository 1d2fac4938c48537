//! A report reaches Python as Python objects made from the Rust value by serde (`pythonize`):
//! dicts, lists, ints, floats, strings and None, the same values `--json` prints, with no
//! JSON text for Python to parse again. `rtloop.reports` types them. A recording's header and
//! events reach Python the same way.

use pyo3::prelude::*;

/// The Python objects for `report` (a dict for a struct, a list for a sequence).
pub(crate) fn to_py(py: Python<'_>, report: &impl serde::Serialize) -> PyResult<Py<PyAny>> {
    Ok(pythonize::pythonize(py, report)?.unbind())
}
