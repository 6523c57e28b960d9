//! Statistics and cells: latency summaries, number formatting, and the markdown table.

use super::*;

#[derive(Clone, Copy)]
pub(super) struct Lat {
    pub(super) p50: f64,
    pub(super) p99: f64,
}

pub(super) fn lat(mut v: Vec<Duration>) -> Res<Lat> {
    if v.is_empty() {
        return Err("no samples".into());
    }
    v.sort();
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    Ok(Lat {
        p50: us(v[v.len() / 2]),
        p99: us(v[(v.len() * 99 / 100).min(v.len() - 1)]),
    })
}

pub(super) fn num(x: f64) -> String {
    if x >= 100.0 {
        let s = format!("{:.0}", x);
        let mut out = String::new();
        for (i, c) in s.chars().enumerate() {
            if i > 0 && (s.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        out
    } else if x >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

pub(super) fn lat_cell(l: &Lat) -> String {
    format!("{} µs (p99 {})", num(l.p50), num(l.p99))
}

pub(super) fn ratio(a: f64, b: f64) -> String {
    if b > 0.0 {
        format!("{:.2}×", a / b)
    } else {
        "—".into()
    }
}

pub(super) fn mib(kib: u64) -> String {
    format!("{} MiB", num(kib as f64 / 1024.0))
}

/// A measured value for one binary: the cell text and the number compared with the floor.
#[derive(Clone)]
pub(super) struct Cell {
    pub(super) text: String,
    pub(super) value: Option<f64>,
}

impl Cell {
    pub(super) fn of(r: Res<(String, f64)>) -> Cell {
        match r {
            Ok((text, value)) => Cell {
                text,
                value: Some(value),
            },
            Err(e) => {
                eprintln!("bench:   failed: {e}");
                let short: String = e.chars().take(60).collect();
                Cell {
                    text: format!("failed: {}", short.replace('|', "/")),
                    value: None,
                }
            }
        }
    }

    pub(super) fn text(text: String) -> Cell {
        Cell { text, value: None }
    }
}

pub(super) struct Row {
    pub(super) measure: String,
    pub(super) ours: Cell,
    pub(super) base: Option<Cell>,
    pub(super) floor: String,
    pub(super) floor_value: Option<f64>,
    /// How to compare a value with the floor: a ratio, or a difference in µs.
    pub(super) diff: bool,
    pub(super) goal: String,
}

impl Row {
    pub(super) fn compare(&self, c: &Cell) -> String {
        match (c.value, self.floor_value) {
            (Some(v), Some(f)) if self.diff => {
                let sign = if v >= f { "+" } else { "−" };
                format!("{sign}{} µs ({})", num((v - f).abs()), ratio(v, f))
            }
            (Some(v), Some(f)) => ratio(v, f),
            _ => "—".into(),
        }
    }
}

pub(super) struct Table {
    pub(super) rows: Vec<Row>,
    pub(super) baseline: bool,
    pub(super) costs: Vec<(String, f64)>,
    pub(super) t0: Instant,
}

impl Table {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn row(
        &mut self,
        measure: &str,
        ours: Cell,
        base: Option<Cell>,
        floor: &str,
        floor_value: Option<f64>,
        diff: bool,
        goal: &str,
    ) {
        self.rows.push(Row {
            measure: measure.into(),
            ours,
            base,
            floor: floor.into(),
            floor_value,
            diff,
            goal: goal.into(),
        });
    }

    pub(super) fn print(&self) {
        let mut out = String::new();
        if self.baseline {
            out.push_str("| measure | ours | floor | ours vs floor | baseline | baseline vs floor | goal |\n");
            out.push_str("|---|---|---|---|---|---|---|\n");
        } else {
            out.push_str("| measure | ours | floor | ours vs floor | goal |\n");
            out.push_str("|---|---|---|---|---|\n");
        }
        for r in &self.rows {
            let _ = write!(
                out,
                "| {} | {} | {} | {} |",
                r.measure,
                r.ours.text,
                r.floor,
                r.compare(&r.ours)
            );
            if self.baseline {
                match &r.base {
                    Some(b) => {
                        let _ = write!(out, " {} | {} |", b.text, r.compare(b));
                    }
                    None => out.push_str(" n/a | — |"),
                }
            }
            let _ = writeln!(out, " {} |", r.goal);
        }
        print!("{out}");
        let costs: Vec<String> = self
            .costs
            .iter()
            .map(|(name, s)| format!("{name} {s:.1} s"))
            .collect();
        println!(
            "\nRun time of the measurements: {:.0} s ({}).",
            self.t0.elapsed().as_secs_f64(),
            costs.join(", ")
        );
    }
}
