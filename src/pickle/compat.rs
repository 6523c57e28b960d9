//! Python 2 module and name mapping applied to globals of protocol 0 to 2 pickles, like
//! `pickle.Unpickler.find_class` with `fix_imports=True` (`_compat_pickle`). Only the subset a
//! display needs: builtins, copyreg, exceptions and the common renamed modules.

const IMPORT_MAPPING: &[(&str, &str)] = &[
    ("__builtin__", "builtins"),
    ("copy_reg", "copyreg"),
    ("Queue", "queue"),
    ("SocketServer", "socketserver"),
    ("ConfigParser", "configparser"),
    ("repr", "reprlib"),
    ("cPickle", "pickle"),
    ("_abcoll", "collections.abc"),
    ("UserDict", "collections"),
    ("UserList", "collections"),
    ("UserString", "collections"),
    ("exceptions", "builtins"),
    ("StringIO", "io"),
    ("cStringIO", "io"),
    ("thread", "_thread"),
    ("dummy_thread", "_dummy_thread"),
    ("httplib", "http.client"),
    ("urlparse", "urllib.parse"),
];

/// `(module, name)`.
type Name = (&'static str, &'static str);

const NAME_MAPPING: &[(Name, Name)] = &[
    (("__builtin__", "xrange"), ("builtins", "range")),
    (("__builtin__", "reduce"), ("functools", "reduce")),
    (("__builtin__", "intern"), ("sys", "intern")),
    (("__builtin__", "unichr"), ("builtins", "chr")),
    (("__builtin__", "unicode"), ("builtins", "str")),
    (("__builtin__", "long"), ("builtins", "int")),
    (("__builtin__", "basestring"), ("builtins", "str")),
    (("itertools", "izip"), ("builtins", "zip")),
    (("itertools", "imap"), ("builtins", "map")),
    (("itertools", "ifilter"), ("builtins", "filter")),
    (
        ("UserDict", "IterableUserDict"),
        ("collections", "UserDict"),
    ),
    (("exceptions", "StandardError"), ("builtins", "Exception")),
    (("exceptions", "EnvironmentError"), ("builtins", "OSError")),
    (("exceptions", "IOError"), ("builtins", "OSError")),
    (("exceptions", "WindowsError"), ("builtins", "OSError")),
    (("socket", "_socketobject"), ("socket", "SocketType")),
];

/// Maps a Python 2 global to its Python 3 location.
pub fn map_global(module: &str, name: &str) -> (String, String) {
    if let Some(&(_, to)) = NAME_MAPPING
        .iter()
        .find(|((m, n), _)| *m == module && *n == name)
    {
        return (to.0.to_owned(), to.1.to_owned());
    }
    if let Some(&(_, to)) = IMPORT_MAPPING.iter().find(|(m, _)| *m == module) {
        return (to.to_owned(), name.to_owned());
    }
    (module.to_owned(), name.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps() {
        assert_eq!(
            map_global("__builtin__", "set"),
            ("builtins".into(), "set".into())
        );
        assert_eq!(
            map_global("__builtin__", "xrange"),
            ("builtins".into(), "range".into())
        );
        assert_eq!(
            map_global("copy_reg", "_reconstructor"),
            ("copyreg".into(), "_reconstructor".into())
        );
        assert_eq!(map_global("mymod", "X"), ("mymod".into(), "X".into()));
    }
}
