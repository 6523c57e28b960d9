//! Unit tests of `crate::pickle::render`.

use super::*;

#[test]
fn floats() {
    let cases: &[(f64, &str)] = &[
        (1e16, "1e+16"),
        (1e-5, "1e-05"),
        (f64::INFINITY, "inf"),
        (f64::NEG_INFINITY, "-inf"),
        (f64::NAN, "nan"),
        (-0.0, "-0.0"),
        (0.1, "0.1"),
        (1.0, "1.0"),
        (123456789.125, "123456789.125"),
        (1e15, "1000000000000000.0"),
        (0.0001, "0.0001"),
        (1.5e-7, "1.5e-07"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (5e-324, "5e-324"),
        (2.5, "2.5"),
        (-1234.5, "-1234.5"),
        (9007199254740993.0, "9007199254740992.0"),
    ];
    for &(x, want) in cases {
        assert_eq!(float_repr(x), want, "{x}");
    }
}

#[test]
fn complexes() {
    assert_eq!(complex_repr(1.0, 2.0), "(1+2j)");
    assert_eq!(complex_repr(0.0, 2.0), "2j");
    assert_eq!(complex_repr(-0.0, 2.0), "(-0+2j)");
    assert_eq!(complex_repr(1.0, f64::NAN), "(1+nanj)");
    assert_eq!(complex_repr(1.5, -2.5), "(1.5-2.5j)");
    assert_eq!(complex_repr(1e20, 1.0), "(1e+20+1j)");
}

#[test]
fn timedeltas() {
    assert_eq!(timedelta_repr(0, 0, 0), "datetime.timedelta(0)");
    assert_eq!(
        timedelta_repr(1, 5, 0),
        "datetime.timedelta(days=1, seconds=5)"
    );
    assert_eq!(
        timedelta_repr(-1, 68400, 0),
        "datetime.timedelta(days=-1, seconds=68400)"
    );
}
