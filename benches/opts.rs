//! The benchmark's options (all given by scripts/bench.sh).

use super::*;

pub(super) struct Opts {
    pub(super) server: PathBuf,
    pub(super) baseline: Option<PathBuf>,
    pub(super) fixture: PathBuf,
    pub(super) load: PathBuf,
    pub(super) pickles: Option<PathBuf>,
    pub(super) nginx: Option<PathBuf>,
    pub(super) tmp: PathBuf,
    pub(super) scale: f64,
    pub(super) budget: Duration,
    /// Comma-separated step names to run (all when absent).
    pub(super) only: Option<String>,
}

impl Opts {
    pub(super) fn parse() -> Res<Opts> {
        let mut args = std::env::args().skip(1);
        let (mut server, mut baseline, mut fixture, mut load, mut pickles, mut tmp) =
            (None, None, None, None, None, None);
        let mut scale = 1.0;
        let mut budget = 400.0;
        let mut only = None;
        let mut nginx = None;
        while let Some(a) = args.next() {
            let mut value = || args.next().ok_or(format!("{a} needs a value"));
            match a.as_str() {
                "--server" => server = Some(PathBuf::from(value()?)),
                "--baseline" => baseline = Some(PathBuf::from(value()?)),
                "--fixture" => fixture = Some(PathBuf::from(value()?)),
                "--load" => load = Some(PathBuf::from(value()?)),
                "--pickles" => pickles = Some(PathBuf::from(value()?)),
                "--tmp" => tmp = Some(PathBuf::from(value()?)),
                "--scale" => scale = value()?.parse().map_err(err("--scale"))?,
                "--budget-s" => budget = value()?.parse().map_err(err("--budget-s"))?,
                "--only" => only = Some(value()?),
                "--nginx" => nginx = Some(PathBuf::from(value()?)),
                "--bench" => {} // added by `cargo bench`
                other => return Err(format!("unknown argument {other}")),
            }
        }
        Ok(Opts {
            server: server.ok_or("--server is required")?,
            baseline,
            fixture: fixture.ok_or("--fixture is required")?,
            load: load.ok_or("--load is required")?,
            pickles,
            nginx,
            tmp: tmp.ok_or("--tmp is required")?,
            scale,
            budget: Duration::from_secs_f64(f64::max(budget, 0.0)),
            only,
        })
    }

    pub(super) fn n(&self, count: u64) -> u64 {
        ((count as f64 * self.scale) as u64).max(1)
    }

    pub(super) fn secs(&self, s: f64) -> Duration {
        Duration::from_secs_f64(s * self.scale.max(0.05))
    }
}
