//! `traceaudit trend CORPUS...`: the fail rate of each check night by night, with its 95% Wilson
//! interval, and the nights the nightly gate would have stopped. A night is flagged when
//! `traceaudit diff` of the night before against it is a regression under the same `--fail-on`
//! rules: the trend runs that diff, so the two can never disagree.

use crate::report::corpus::{guarded, name_the_unreadable, CorpusDir};
use crate::report::diff::{self, DiffOptions, Rules};
use crate::report::groups::{group_counts, ALL};
use crate::report::stats::{rate, wilson};
use crate::report::table::{Cell, Column, Media, Row, Table};
use crate::report::text::{fit, interval, pct, wrap};
use serde::Serialize;
use std::io;
use std::path::{Path, PathBuf};

/// One night: a corpus, and what the gate said of it against the night before.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Night {
    /// The corpus directory's name.
    pub name: String,
    pub engine_version: String,
    pub config_hash: String,
    pub runs: u64,
    pub findings: u64,
    /// `diff PREVIOUS THIS` is a regression (never for the first night).
    pub flagged: bool,
    /// Each rule that fired, in the diff's words.
    pub regressions: Vec<String>,
    /// Finding keys only in this night, and only in the night before (null for the first).
    pub appeared_keys: Option<u64>,
    pub vanished_keys: Option<u64>,
    /// The diff's notes (checks run on one side only, differing configuration or engine).
    pub notes: Vec<String>,
}

/// One check on one night.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Point {
    /// The check ran that night.
    pub ran: bool,
    pub checked: u64,
    pub fail: u64,
    pub rate: Option<f64>,
    /// 95% Wilson score interval of `rate`.
    pub ci_low: Option<f64>,
    pub ci_high: Option<f64>,
    /// Change from the night before (a fraction) with its 95% Newcombe interval, as the diff
    /// computes it.
    pub change: Option<f64>,
    pub change_ci_low: Option<f64>,
    pub change_ci_high: Option<f64>,
    /// The diff's `rate` rule fired for this check on this night.
    pub regression: bool,
}

/// One check over every night.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CheckTrend {
    pub check: String,
    /// One per night, in night order.
    pub points: Vec<Point>,
}

/// Everything `traceaudit trend` shows.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Trend {
    pub rules: Rules,
    pub interval: &'static str,
    pub change_interval: &'static str,
    pub nights: Vec<Night>,
    pub checks: Vec<CheckTrend>,
}

impl Trend {
    pub fn flagged(&self) -> usize {
        self.nights.iter().filter(|n| n.flagged).count()
    }
}

/// The corpora `paths` name, in night order: a corpus stands for itself; any other directory
/// for the corpora directly inside it, in name order (so nights named by date sort by date).
pub fn nights(paths: &[PathBuf]) -> io::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in paths {
        if p.join("manifest.json").exists() {
            out.push(p.clone());
            continue;
        }
        if !p.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} is neither a corpus nor a folder of corpora",
                    p.display()
                ),
            ));
        }
        let mut inside: Vec<PathBuf> = std::fs::read_dir(p)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|c| c.join("manifest.json").exists())
            .collect();
        if inside.is_empty() {
            return Err(io::Error::other(format!(
                "{} holds no corpus (a directory with manifest.json written by `traceaudit \
                 audit`)",
                p.display()
            )));
        }
        inside.sort();
        out.extend(inside);
    }
    Ok(out)
}

fn name_of(p: &Path) -> String {
    p.file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| p.display().to_string())
}

/// The trend over `corpora` (in night order) under `rules`.
pub fn build(corpora: &[PathBuf], rules: &Rules) -> io::Result<Trend> {
    let mut opened = Vec::new();
    for p in corpora {
        opened.push(CorpusDir::open(p)?);
    }
    let all: Vec<&CorpusDir> = opened.iter().collect();
    guarded(|| build_over(&opened, corpora, rules)).map_err(|e| name_the_unreadable(&all, e))
}

fn build_over(opened: &[CorpusDir], corpora: &[PathBuf], rules: &Rules) -> io::Result<Trend> {
    let mut checks: Vec<String> = Vec::new();
    for c in opened {
        for name in c.checks() {
            if !checks.contains(&name) {
                checks.push(name);
            }
        }
    }
    let mut trends: Vec<CheckTrend> = checks
        .iter()
        .map(|c| CheckTrend {
            check: c.clone(),
            points: Vec::new(),
        })
        .collect();
    let mut nights = Vec::new();
    for (i, (corpus, path)) in opened.iter().zip(corpora).enumerate() {
        let counts = group_counts(corpus, None)?;
        let ran = corpus.checks();
        let gate = match i {
            0 => None,
            _ => Some(diff::build(
                &opened[i - 1],
                corpus,
                &DiffOptions {
                    by: None,
                    rules: rules.clone(),
                    top: 0,
                },
            )?),
        };
        for t in &mut trends {
            let c = counts.iter().find(|c| c.check == t.check && c.group == ALL);
            let (fail, checked) = c.map(|c| (c.checked_fail, c.checked())).unwrap_or((0, 0));
            let ci = wilson(fail, checked);
            let change = gate
                .as_ref()
                .and_then(|d| d.checks.iter().find(|r| r.check == t.check));
            t.points.push(Point {
                ran: ran.contains(&t.check),
                checked,
                fail,
                rate: rate(fail, checked),
                ci_low: ci.map(|c| c.0),
                ci_high: ci.map(|c| c.1),
                change: change.and_then(|r| r.change),
                change_ci_low: change.and_then(|r| r.ci_low),
                change_ci_high: change.and_then(|r| r.ci_high),
                regression: change.is_some_and(|r| r.regression),
            });
        }
        nights.push(Night {
            name: name_of(path),
            engine_version: corpus.str_field("engine_version"),
            config_hash: corpus.str_field("config_hash"),
            runs: corpus.count("runs"),
            findings: corpus.count("findings"),
            flagged: gate.as_ref().is_some_and(|d| d.is_regression()),
            regressions: gate
                .as_ref()
                .map(|d| d.regressions.clone())
                .unwrap_or_default(),
            appeared_keys: gate.as_ref().map(|d| d.appeared_total),
            vanished_keys: gate.as_ref().map(|d| d.vanished_total),
            notes: gate.map(|d| d.notes).unwrap_or_default(),
        });
    }
    Ok(Trend {
        rules: rules.clone(),
        interval: crate::report::stats::WILSON,
        change_interval: diff::INTERVAL,
        nights,
        checks: trends,
    })
}

/// The trend's tables, every cell computed once: the terminal text and the HTML page lay these
/// out (JSON is the [`Trend`] itself).
#[derive(Debug, Clone, PartialEq)]
pub struct TrendRows {
    /// Per check, its name and a row per night (`c{K}-n{N}` on the page, flagged where the
    /// check's rate rule fired).
    pub checks: Vec<(String, Table)>,
}

impl TrendRows {
    pub fn of(t: &Trend) -> TrendRows {
        TrendRows {
            checks: t
                .checks
                .iter()
                .enumerate()
                .map(|(i, c)| (c.check.clone(), point_table(c, &t.nights, i + 1)))
                .collect(),
        }
    }
}

/// The change from the night before with its interval, empty on the first night.
fn change(p: &Point) -> String {
    match p.change {
        Some(d) => format!(
            "{:+.1} {}",
            d * 100.0,
            diff::pp_interval(p.change_ci_low.zip(p.change_ci_high))
        ),
        None => String::new(),
    }
}

/// Which rule a point's night fired.
fn flag(p: &Point, n: &Night) -> Cell {
    if p.regression {
        Cell::Mark {
            plain: "rate",
            html: "<span class=\"flagword\">rate rule</span>",
        }
    } else if n.flagged {
        Cell::Mark {
            plain: "night",
            html: "<span class=\"muted\">night flagged</span>",
        }
    } else {
        Cell::Missing
    }
}

/// The `k`th check's points, a row per night.
fn point_table(c: &CheckTrend, nights: &[Night], k: usize) -> Table {
    let columns = vec![
        Column::text("night", 24).code(60, 60),
        Column::number("checked", 7),
        Column::number("fail", 6),
        Column::number("fail %", 6),
        Column::text("95% CI", 14).gap(2),
        Column::text("change pp [95% CI]", 24).only(Media::Terminal),
        Column::number("change (pp)", 0).only(Media::Page),
        Column::text("95% CI (pp)", 0).only(Media::Page),
        Column::text("flag", 0).long(""),
    ];
    let rows = c
        .points
        .iter()
        .zip(nights)
        .enumerate()
        .map(|(i, (p, n))| {
            let night = Cell::recorded(&n.name);
            let (cells, rest) = if p.ran {
                let cells = vec![
                    night,
                    Cell::value(p.checked),
                    Cell::value(p.fail),
                    Cell::Value(pct(p.rate)),
                    Cell::Value(interval(p.ci_low.zip(p.ci_high))),
                    Cell::Value(change(p)),
                    Cell::Value(diff::pp_change(p.change)),
                    Cell::Value(diff::pp_interval(p.change_ci_low.zip(p.change_ci_high))),
                    flag(p, n),
                ];
                (cells, None)
            } else {
                let rest = Cell::Mark {
                    plain: "(not run)",
                    html: "not run that night",
                };
                (vec![night], Some(rest))
            };
            Row {
                cells,
                rest,
                id: Some(format!("c{k}-n{}", i + 1)),
                flagged: p.regression,
            }
        })
        .collect();
    Table::new(columns, rows)
}

/// The trend as terminal text, at most 100 columns wide: per check a line per night, then
/// the flagged nights with the rules that fired.
pub fn render_table(t: &Trend) -> String {
    let mut o = String::new();
    o.push_str(&format!(
        "traceaudit trend: {} night(s), {} flagged by the diff rules ({})\n",
        t.nights.len(),
        t.flagged(),
        t.rules.describe()
    ));
    for (check, points) in &TrendRows::of(t).checks {
        o.push_str(&format!("\n{}\n", fit(check, 60)));
        o.push_str(&points.terminal());
    }
    o.push('\n');
    o.push_str(&wrap(
        &format!(
            "fail % = checked-fail among checked runs; 95% CI = Wilson score interval; change = \
             this night minus the night before ({}). flag: rate = this check's rate rule fired; \
             night = another rule fired that night.",
            t.change_interval
        ),
        1000,
        100,
        "",
        "",
    ));
    if t.flagged() > 0 {
        o.push_str("\nFlagged nights (the diff against the night before is a regression)\n");
        for n in t.nights.iter().filter(|n| n.flagged) {
            o.push_str(&format!("{}\n", fit(&n.name, 60)));
            for r in &n.regressions {
                o.push_str(&wrap(r, 400, 100, "  - ", "    "));
            }
        }
    }
    let noted: Vec<&Night> = t.nights.iter().filter(|n| !n.notes.is_empty()).collect();
    if !noted.is_empty() {
        o.push('\n');
        for n in noted {
            for note in &n.notes {
                o.push_str(&wrap(
                    &format!("{}: {note}", n.name),
                    400,
                    100,
                    "note: ",
                    "      ",
                ));
            }
        }
    }
    crate::report::text::trim_lines(&o)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nights_come_from_corpora_and_folders() {
        let dir = tempfile::tempdir().unwrap();
        let folder = dir.path().join("nightly");
        for name in ["2025-06-02", "2025-06-01", "not-a-corpus"] {
            std::fs::create_dir_all(folder.join(name)).unwrap();
        }
        for name in ["2025-06-02", "2025-06-01"] {
            std::fs::write(folder.join(name).join("manifest.json"), "{}").unwrap();
        }
        let single = folder.join("2025-06-02");
        let got = nights(&[single.clone(), folder.clone()]).unwrap();
        assert_eq!(
            got,
            [single, folder.join("2025-06-01"), folder.join("2025-06-02")]
        );
        assert!(nights(&[folder.join("not-a-corpus")]).is_err());
        assert!(nights(&[dir.path().join("missing")]).is_err());
    }
}
