//! # rtloop-native
//!
//! Peer libraries rtloop talks to through their C API (liblsl, libzmq) are not compiled in:
//! the Python wheels the README's first command installs bundle them (pylsl, pyzmq), and
//! they are loaded at run time, so rtloop builds without them and says how to get one that is
//! missing. One loader for all of them: [`Library::load`] tries, in order, the library's
//! environment variable, the wheel of the Python that runs rtloop (`$RTLOOP_PYTHON`, else
//! `python3`), then the system's names; [`native_api!`] declares a library's functions and
//! looks each up once.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::path::PathBuf;

pub use libloading;

/// Where a library is looked for.
#[derive(Debug, Clone, Copy)]
pub struct Library {
    /// Its name in messages (`liblsl`).
    pub name: &'static str,
    /// The environment variable naming a file to use first (`RTLOOP_LIBLSL`).
    pub env: &'static str,
    /// The Python package that bundles it (`pylsl`), for messages.
    pub wheel: &'static str,
    /// Python code that prints the bundled file's path (run by `$RTLOOP_PYTHON` or `python3`).
    pub locate: &'static str,
    /// Names for the system's loader, last.
    pub system: &'static [&'static str],
    /// How to get it, for the error (`pip install pylsl`, which bundles liblsl 1.18).
    pub install: &'static str,
}

/// A library that could not be found or loaded, with every place tried.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{library} not found: install {install} or set {env} to a {library}.so; tried: {}", tried.join("; "))]
pub struct NotFound {
    /// The library.
    pub library: &'static str,
    /// How to get it.
    pub install: &'static str,
    /// Its environment variable.
    pub env: &'static str,
    /// Each place tried, with why it failed.
    pub tried: Vec<String>,
}

/// A loaded file that lacks a function of the C API.
#[derive(Debug, thiserror::Error)]
#[error("{library} lacks {symbol}: {source}")]
pub struct MissingSymbol {
    /// The library.
    pub library: &'static str,
    /// The function.
    pub symbol: &'static str,
    /// The loader's error.
    pub source: libloading::Error,
}

impl Library {
    /// The bundled file of the Python that runs rtloop, if its wheel is importable.
    #[must_use]
    pub fn in_python_wheel(&self) -> Option<PathBuf> {
        let out = std::process::Command::new(rtloop_sys::python())
            .args(["-c", self.locate])
            .stderr(std::process::Stdio::null())
            .output()
            .ok()?;
        let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        (out.status.success() && p.is_file()).then_some(p)
    }

    /// Find the library and look its functions up with `api` (a [`native_api!`] type's
    /// `load`): the first place that has a file with every function wins.
    ///
    /// # Safety
    /// Loading a shared library runs its initialisers, and `api` must take the library's
    /// symbols with their C signatures: the caller names a library whose initialisers only
    /// set up its own state and an `api` declared from its header.
    pub unsafe fn load<A>(
        &self,
        api: unsafe fn(libloading::Library) -> Result<A, MissingSymbol>,
    ) -> Result<(A, PathBuf), NotFound> {
        let mut candidates: Vec<PathBuf> = Vec::new();
        let mut tried = Vec::new();
        if let Some(p) = std::env::var_os(self.env) {
            candidates.push(p.into());
        }
        match self.in_python_wheel() {
            Some(p) => candidates.push(p),
            None => tried.push(format!(
                "{} (not importable by $RTLOOP_PYTHON / python3)",
                self.wheel
            )),
        }
        candidates.extend(self.system.iter().map(PathBuf::from));
        for c in candidates {
            // SAFETY: the caller vouches for what the library's initialisers do.
            match unsafe { libloading::Library::new(&c) } {
                // SAFETY: the caller vouches that `api` matches this library's header; a
                // file lacking a function is refused by it.
                Ok(lib) => match unsafe { api(lib) } {
                    Ok(a) => return Ok((a, c)),
                    Err(e) => tried.push(format!("{} ({e})", c.display())),
                },
                Err(e) => tried.push(format!("{} ({e})", c.display())),
            }
        }
        Err(NotFound {
            library: self.name,
            install: self.install,
            env: self.env,
            tried,
        })
    }
}

/// Declare a library's functions as a struct of C function pointers, with an
/// `unsafe fn load(lib) -> Result<Api, MissingSymbol>` that looks each up once and keeps the
/// library loaded while the struct lives:
///
/// ```ignore
/// rtloop_native::native_api! { "libzmq", pub struct Api {
///     zmq_version: fn(*mut c_int, *mut c_int, *mut c_int);
/// } }
/// ```
#[macro_export]
macro_rules! native_api {
    ($library:literal, $vis:vis struct $api:ident { $($name:ident : fn($($arg:ty),*) $(-> $ret:ty)?;)* }) => {
        /// The loaded functions.
        #[allow(non_snake_case, missing_docs, dead_code, clippy::struct_field_names)]
        $vis struct $api {
            $(pub $name: unsafe extern "C" fn($($arg),*) $(-> $ret)?,)*
            _lib: $crate::libloading::Library,
        }
        impl $api {
            /// Look every function up in `lib`.
            ///
            /// # Safety
            /// `lib` must be the library these signatures were declared from.
            pub unsafe fn load(lib: $crate::libloading::Library) -> Result<$api, $crate::MissingSymbol> {
                // SAFETY: the caller guarantees the library is the one whose symbols have
                // these C signatures; the pointers stay valid while `_lib` is loaded.
                unsafe {
                    Ok($api {
                        $($name: *lib
                            .get::<unsafe extern "C" fn($($arg),*) $(-> $ret)?>(concat!(stringify!($name), "\0").as_bytes())
                            .map_err(|source| $crate::MissingSymbol { library: $library, symbol: stringify!($name), source })?,)*
                        _lib: lib,
                    })
                }
            }
        }
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    native_api! { "libc", struct Libc {
        getpid: fn() -> i32;
    } }

    native_api! { "libc", struct NoSuch {
        rtloop_no_such_function: fn();
    } }

    const LIBC: Library = Library {
        name: "libc",
        env: "RTLOOP_TEST_NO_SUCH_VAR",
        wheel: "no_such_wheel",
        locate: "import no_such_wheel",
        system: &["libc.so.6"],
        install: "glibc",
    };

    #[test]
    fn a_library_is_found_by_its_system_name_and_its_functions_work() {
        // SAFETY: glibc's initialisers are the process's own; getpid takes nothing.
        let (api, path) = unsafe { LIBC.load(Libc::load) }.unwrap();
        assert_eq!(path, PathBuf::from("libc.so.6"));
        // SAFETY: getpid has no preconditions.
        assert_eq!(unsafe { (api.getpid)() } as u32, std::process::id());
    }

    #[test]
    fn a_missing_library_or_function_says_what_was_tried_and_how_to_get_it() {
        let missing = Library {
            system: &["librtloop-no-such.so"],
            ..LIBC
        };
        // SAFETY: nothing is loaded: no such file.
        let Err(e) = (unsafe { missing.load(Libc::load) }) else {
            panic!("loaded")
        };
        let e = e.to_string();
        assert!(
            e.starts_with("libc not found: install glibc or set RTLOOP_TEST_NO_SUCH_VAR to a libc.so; tried: no_such_wheel (not importable"),
            "{e}"
        );
        assert!(e.contains("librtloop-no-such.so ("), "{e}");
        // SAFETY: glibc, as above; the lookup fails before any call.
        let Err(e) = (unsafe { LIBC.load(NoSuch::load) }) else {
            panic!("loaded")
        };
        let e = e.to_string();
        assert!(
            e.contains("libc.so.6 (libc lacks rtloop_no_such_function: "),
            "{e}"
        );
    }
}
