//! A report's table as every renderer shares it: the columns, each saying how the terminal,
//! Markdown and HTML show it, and the rows with their cells computed once. A renderer only lays
//! the cells out, so a column is added in one place. Recorded cells are escaped per medium
//! here: cut to the column on the terminal, a bounded code span or escaped prose in Markdown,
//! bounded and entity-escaped in HTML.

use crate::report::text::{bounded, fit, html, html_bounded, md_code, md_text, terminal};

/// How Markdown or HTML shows a column's recorded text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Shown {
    /// A code span, bounded to this many characters.
    Code(usize),
    /// Escaped prose, bounded to this many characters.
    Text(usize),
}

/// Where a column is shown.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Media {
    All,
    Terminal,
    /// Markdown and HTML.
    Page,
}

/// How the terminal shows a column's recorded text.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Cut {
    /// Cut to the column's width, ending in `…`.
    Fit,
    /// Bounded to this many characters, the cut said in words (the column may overflow).
    Bounded(usize),
    /// Whole.
    Whole,
}

/// What a cell holds.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// A value of our own making (a count, a rate, an interval, a duration): the same text in
    /// every medium (still escaped in HTML).
    Value(String),
    /// Recorded text: shown as the column says for each medium.
    Recorded(String),
    /// Nothing recorded: empty in every medium.
    Missing,
    /// A value that is not known: `-` in every medium.
    Unknown,
    /// Words of our own, with the markup the HTML page shows them in.
    Mark {
        plain: &'static str,
        html: &'static str,
    },
}

impl Cell {
    pub fn value(v: impl ToString) -> Cell {
        Cell::Value(v.to_string())
    }

    pub fn recorded(s: &str) -> Cell {
        Cell::Recorded(s.to_string())
    }

    /// A count, or [`Cell::Unknown`].
    pub fn count(n: Option<u64>) -> Cell {
        n.map_or(Cell::Unknown, Cell::value)
    }
}

/// Characters of recorded text Markdown and HTML show when the column does not say.
const DEFAULT_BOUND: usize = 200;

/// One column: its headers and how each medium shows its cells.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// The header on the terminal.
    pub short: String,
    /// The header in Markdown and HTML.
    pub long: String,
    /// Characters of the header the HTML page shows (all of it without a bound).
    pub long_max: Option<usize>,
    /// Characters of the column on the terminal (recorded cells are cut to it).
    pub width: usize,
    /// Spaces before the column on the terminal.
    pub gap: usize,
    pub cut: Cut,
    /// A number: right-aligned in every medium.
    pub numeric: bool,
    pub media: Media,
    pub md: Shown,
    pub html: Shown,
}

impl Column {
    /// A column of recorded text (or of our own words), left-aligned; its recorded text is
    /// prose bounded to 200 characters on the pages unless [`Column::code`] or
    /// [`Column::shown`] says otherwise.
    pub fn text(header: &str, width: usize) -> Column {
        Column {
            short: header.to_string(),
            long: header.to_string(),
            width,
            long_max: None,
            gap: 1,
            cut: Cut::Fit,
            numeric: false,
            media: Media::All,
            md: Shown::Text(DEFAULT_BOUND),
            html: Shown::Text(DEFAULT_BOUND),
        }
    }

    /// A column of numbers, right-aligned.
    pub fn number(header: &str, width: usize) -> Column {
        Column {
            numeric: true,
            ..Column::text(header, width)
        }
    }

    /// Headed `long` in Markdown and HTML.
    pub fn long(mut self, long: &str) -> Column {
        self.long = long.to_string();
        self
    }

    /// The HTML page shows at most `max` characters of the header.
    pub fn long_max(mut self, max: usize) -> Column {
        self.long_max = Some(max);
        self
    }

    /// Recorded text as a code span bounded to `md` characters in Markdown, `html` in HTML.
    pub fn code(mut self, md: usize, html: usize) -> Column {
        self.md = Shown::Code(md);
        self.html = Shown::Code(html);
        self
    }

    /// How Markdown and HTML show the recorded text.
    pub fn shown(mut self, md: Shown, html: Shown) -> Column {
        self.md = md;
        self.html = html;
        self
    }

    /// Shown in `media` only.
    pub fn only(mut self, media: Media) -> Column {
        self.media = media;
        self
    }

    fn on_terminal(&self) -> bool {
        self.media != Media::Page
    }

    fn on_page(&self) -> bool {
        self.media != Media::Terminal
    }

    /// How the terminal cuts the recorded text.
    pub fn cut(mut self, cut: Cut) -> Column {
        self.cut = cut;
        self
    }

    /// `spaces` before the column on the terminal.
    pub fn gap(mut self, spaces: usize) -> Column {
        self.gap = spaces;
        self
    }
}

/// One row: its cells, and on the HTML page its element id and whether it is flagged.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Row {
    /// A cell per column, or per leading column when `rest` says the rest.
    pub cells: Vec<Cell>,
    /// What the columns past `cells` say together: one muted cell spanning them.
    pub rest: Option<Cell>,
    pub id: Option<String>,
    pub flagged: bool,
}

impl Row {
    pub fn of(cells: Vec<Cell>) -> Row {
        Row {
            cells,
            ..Row::default()
        }
    }
}

/// Columns and rows.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Table {
    pub columns: Vec<Column>,
    pub rows: Vec<Row>,
}

impl Table {
    pub fn new(columns: Vec<Column>, rows: Vec<Row>) -> Table {
        Table { columns, rows }
    }

    pub fn is_empty(&self) -> bool {
        self.rows.is_empty()
    }

    /// The rows at `rows` (in that order), without the columns at `drop`.
    pub fn subset(&self, rows: &[usize], drop: &[usize]) -> Table {
        let keep = |i: &usize| !drop.contains(i);
        let cols = |cells: &[Cell]| -> Vec<Cell> {
            (0..cells.len())
                .filter(keep)
                .map(|i| cells[i].clone())
                .collect()
        };
        Table {
            columns: (0..self.columns.len())
                .filter(keep)
                .map(|i| self.columns[i].clone())
                .collect(),
            rows: rows
                .iter()
                .map(|&r| Row {
                    cells: cols(&self.rows[r].cells),
                    ..self.rows[r].clone()
                })
                .collect(),
        }
    }

    /// The header line and a line per row, each column padded to its width.
    pub fn terminal(&self) -> String {
        let header = self
            .columns
            .iter()
            .filter(|c| c.on_terminal())
            .map(|c| (c, c.short.clone()));
        let mut o = terminal_line(header);
        for row in &self.rows {
            o.push_str(&self.terminal_row(row));
        }
        o
    }

    /// One row as a terminal line.
    pub fn terminal_row(&self, row: &Row) -> String {
        let cells = self
            .columns
            .iter()
            .zip(&row.cells)
            .filter(|(c, _)| c.on_terminal())
            .map(|(c, cell)| (c, terminal_cell(c, cell)));
        let mut o = terminal_line(cells);
        if let Some(rest) = &row.rest {
            o.pop();
            o.push(' ');
            o.push_str(&terminal_cell(&spanning(), rest));
            o.push('\n');
        }
        o
    }

    /// A GitHub-flavoured table: the header, the alignment line and the rows.
    pub fn markdown(&self) -> String {
        let columns: Vec<&Column> = self.columns.iter().filter(|c| c.on_page()).collect();
        let mut o = String::from("|");
        for c in &columns {
            if c.long.is_empty() {
                o.push_str(" |");
            } else {
                o.push_str(&format!(" {} |", c.long));
            }
        }
        o.push_str("\n|");
        for c in &columns {
            o.push_str(if c.numeric { "---:|" } else { "---|" });
        }
        o.push('\n');
        for row in &self.rows {
            o.push('|');
            for (c, cell) in self.columns.iter().zip(&row.cells) {
                if c.on_page() {
                    o.push_str(&format!(" {} |", md_cell(c, cell)));
                }
            }
            if let Some(rest) = &row.rest {
                o.push_str(&format!(" {} |", md_cell(&spanning(), rest)));
            }
            o.push('\n');
        }
        o
    }

    /// An HTML table.
    pub fn html(&self) -> String {
        self.html_linking(|_, _| None)
    }

    /// An HTML table whose cell at (row, column) links to `link(row, column)` when it names a
    /// target (an id of the page's own).
    pub fn html_linking(&self, link: impl Fn(usize, usize) -> Option<String>) -> String {
        let n = |c: &Column| if c.numeric { " class=\"n\"" } else { "" };
        let mut o = String::from("<table><tr>");
        for c in self.columns.iter().filter(|c| c.on_page()) {
            let header = match c.long_max {
                Some(max) => html_bounded(&c.long, max),
                None => html(&c.long),
            };
            o.push_str(&format!("<th{}>{header}</th>", n(c)));
        }
        o.push_str("</tr>\n");
        for (r, row) in self.rows.iter().enumerate() {
            o.push_str("<tr");
            if let Some(id) = &row.id {
                o.push_str(&format!(" id=\"{id}\""));
            }
            if row.flagged {
                o.push_str(" class=\"flag\"");
            }
            o.push('>');
            for (k, (c, cell)) in self.columns.iter().zip(&row.cells).enumerate() {
                if !c.on_page() {
                    continue;
                }
                let mut text = html_cell(c, cell);
                if let Some(target) = link(r, k) {
                    text = format!("<a href=\"#{target}\">{text}</a>");
                }
                o.push_str(&format!("<td{}>{text}</td>", n(c)));
            }
            if let Some(rest) = &row.rest {
                let spanned = self.columns[row.cells.len().min(self.columns.len())..]
                    .iter()
                    .filter(|c| c.on_page())
                    .count();
                o.push_str(&format!(
                    "<td colspan=\"{spanned}\" class=\"muted\">{}</td>",
                    html_cell(&spanning(), rest)
                ));
            }
            o.push_str("</tr>\n");
        }
        o.push_str("</table>\n");
        o
    }
}

/// The column a row's rest is shown in: whole.
fn spanning() -> Column {
    Column::text("", 0)
        .cut(Cut::Whole)
        .shown(Shown::Text(usize::MAX), Shown::Text(usize::MAX))
}

/// Cells laid out on a terminal line, each padded to its column's width.
fn terminal_line<'a>(cells: impl Iterator<Item = (&'a Column, String)>) -> String {
    let mut o = String::new();
    for (i, (c, t)) in cells.enumerate() {
        if i > 0 {
            o.push_str(&" ".repeat(c.gap));
        }
        let w = c.width;
        o.push_str(&if c.numeric {
            format!("{t:>w$}")
        } else {
            format!("{t:<w$}")
        });
    }
    o.push('\n');
    o
}

/// A cell as terminal text.
fn terminal_cell(c: &Column, cell: &Cell) -> String {
    match cell {
        Cell::Value(v) => v.clone(),
        Cell::Recorded(s) => match c.cut {
            Cut::Fit => fit(s, c.width),
            Cut::Bounded(max) => bounded(s, max),
            Cut::Whole => terminal(s),
        },
        Cell::Missing => String::new(),
        Cell::Unknown => "-".into(),
        Cell::Mark { plain, .. } => plain.to_string(),
    }
}

/// A cell as Markdown table-cell text.
pub fn md_cell(c: &Column, cell: &Cell) -> String {
    match cell {
        Cell::Value(v) => v.clone(),
        Cell::Recorded(s) => match c.md {
            Shown::Code(max) => md_code(s, max),
            Shown::Text(max) => md_text(s, max),
        },
        Cell::Missing => String::new(),
        Cell::Unknown => "-".into(),
        Cell::Mark { plain, .. } => plain.to_string(),
    }
}

/// A cell as HTML element content.
pub fn html_cell(c: &Column, cell: &Cell) -> String {
    match cell {
        Cell::Value(v) => html(v),
        Cell::Recorded(s) => match c.html {
            Shown::Code(max) => format!("<code>{}</code>", html_bounded(s, max)),
            Shown::Text(max) => html_bounded(s, max),
        },
        Cell::Missing => String::new(),
        Cell::Unknown => "-".into(),
        Cell::Mark { html, .. } => html.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table() -> Table {
        Table::new(
            vec![
                Column::text("tool", 6).code(10, 20),
                Column::number("n", 3).long("count"),
                Column::text("when", 8).gap(2),
            ],
            vec![Row::of(vec![
                Cell::recorded("a|b<c>\u{1b}long"),
                Cell::value(7),
                Cell::Missing,
            ])],
        )
    }

    #[test]
    fn each_medium_lays_out_the_same_cells() {
        let t = table();
        assert_eq!(t.terminal(), "tool     n  when    \na|b<c…   7          \n");
        assert_eq!(
            t.markdown(),
            "| tool | count | when |\n|---|---:|---|\n| `a\\|b<c>\\u{1b}lon`… (cut 1 chars) | 7 |  |\n"
        );
        assert_eq!(
            t.html(),
            "<table><tr><th>tool</th><th class=\"n\">count</th><th>when</th></tr>\n<tr><td>\
             <code>a|b&lt;c&gt;\\u{1b}long</code></td><td class=\"n\">7</td><td></td></tr>\n\
             </table>\n"
        );
    }

    #[test]
    fn a_column_of_one_medium_and_a_spanning_rest() {
        let t = Table::new(
            vec![
                Column::text("night", 4),
                Column::text("both", 6).only(Media::Terminal),
                Column::number("a", 2).only(Media::Page),
                Column::number("b", 2).only(Media::Page),
            ],
            vec![
                Row::of(vec![
                    Cell::recorded("n1"),
                    Cell::value("1 2"),
                    Cell::value(1),
                    Cell::Unknown,
                ]),
                Row {
                    rest: Some(Cell::Mark {
                        plain: "(none)",
                        html: "nothing",
                    }),
                    ..Row::of(vec![Cell::recorded("n2")])
                },
            ],
        );
        assert_eq!(t.terminal(), "night both  \nn1   1 2   \nn2   (none)\n");
        assert_eq!(
            t.html(),
            "<table><tr><th>night</th><th class=\"n\">a</th><th class=\"n\">b</th></tr>\n\
             <tr><td>n1</td><td class=\"n\">1</td><td class=\"n\">-</td></tr>\n\
             <tr><td>n2</td><td colspan=\"2\" class=\"muted\">nothing</td></tr>\n</table>\n"
        );
    }

    #[test]
    fn a_subset_keeps_ids_and_drops_columns() {
        let mut t = table();
        t.rows[0].id = Some("r-1".into());
        t.rows[0].flagged = true;
        let s = t.subset(&[0], &[1]);
        assert_eq!(s.columns.len(), 2);
        assert_eq!(s.rows[0].cells.len(), 2);
        assert!(s
            .html_linking(|_, k| (k == 0).then(|| "x".to_string()))
            .contains("<tr id=\"r-1\" class=\"flag\"><td><a href=\"#x\"><code>"));
    }
}
