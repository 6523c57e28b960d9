//! Python's reprs of floats, complex numbers and timedeltas.

use super::*;

/// Python's `repr(float)`.
pub fn float_repr(x: f64) -> String {
    format_float(x, true)
}

/// Python's float formatting in `'r'` mode; `add_dot_0` as for `repr` (complex omits it).
pub(super) fn format_float(x: f64, add_dot_0: bool) -> String {
    if x.is_nan() {
        return "nan".to_owned();
    }
    if x.is_infinite() {
        return if x > 0.0 { "inf" } else { "-inf" }.to_owned();
    }
    let sign = if x.is_sign_negative() { "-" } else { "" };
    if x == 0.0 {
        return format!("{sign}0{}", if add_dot_0 { ".0" } else { "" });
    }
    let e = format!("{:e}", x.abs());
    let (mant, exp) = e.split_once('e').unwrap_or((&e, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    let n = digits.len() as i32;
    let decpt = exp + 1;
    let mut out = String::from(sign);
    if decpt <= -4 || decpt > 16 {
        let (first, rest) = digits.split_at(1.min(digits.len()));
        out.push_str(first);
        if !rest.is_empty() {
            out.push('.');
            out.push_str(rest);
        }
        let _ = write!(out, "e{}{:02}", if exp < 0 { '-' } else { '+' }, exp.abs());
    } else if decpt <= 0 {
        out.push_str("0.");
        out.extend(std::iter::repeat_n('0', (-decpt) as usize));
        out.push_str(&digits);
    } else if decpt >= n {
        out.push_str(&digits);
        out.extend(std::iter::repeat_n('0', (decpt - n) as usize));
        if add_dot_0 {
            out.push_str(".0");
        }
    } else {
        let (a, b) = digits.split_at(decpt as usize);
        out.push_str(a);
        out.push('.');
        out.push_str(b);
    }
    out
}

/// Python's `repr(complex(re, im))`.
pub fn complex_repr(re: f64, im: f64) -> String {
    let imag = |signed: bool| {
        let s = format_float(im, false);
        if signed && !s.starts_with('-') {
            format!("+{s}")
        } else {
            s
        }
    };
    if re == 0.0 && re.is_sign_positive() {
        format!("{}j", imag(false))
    } else {
        format!("({}{}j)", format_float(re, false), imag(true))
    }
}

pub(super) fn timedelta_repr(days: i64, secs: i64, us: i64) -> String {
    let mut parts = Vec::new();
    if days != 0 {
        parts.push(format!("days={days}"));
    }
    if secs != 0 {
        parts.push(format!("seconds={secs}"));
    }
    if us != 0 {
        parts.push(format!("microseconds={us}"));
    }
    if parts.is_empty() {
        return "datetime.timedelta(0)".to_owned();
    }
    format!("datetime.timedelta({})", parts.join(", "))
}
