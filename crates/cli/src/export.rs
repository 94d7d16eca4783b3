//! `tributary export`: a commit's rows as NDJSON load lines, to a file or standard output.

use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};

use crate::backend::{self, ServerArgs};
use crate::output::{self, Format};
use crate::query::AtArgs;
use crate::Failure;

#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    /// The graph to export.
    pub graph: String,
    /// Where to write: a file (written whole or not at all: nothing of a failed export is
    /// left under its name), or `-` for standard output.
    #[arg(default_value = "-")]
    pub file: String,
    /// Only these types (comma-separated names); every type when not given.
    #[arg(long, value_delimiter = ',', value_name = "TYPE,...")]
    pub types: Vec<String>,
    #[command(flatten)]
    pub at: AtArgs,
}

pub async fn run(
    args: ExportArgs,
    server: &ServerArgs,
    format: Format,
    out: &mut dyn Write,
) -> Result<(), Failure> {
    let opened = backend::open(&args.graph, server).await?;
    let plan = tributary::plan_export(&*opened, &args.at.at()?, &args.types).await?;
    let total: u64 = plan.types.iter().map(|(_, rows)| rows).sum();
    let progress = std::io::stderr().is_terminal().then(|| {
        let bar = indicatif::ProgressBar::new(total);
        bar.set_style(
            indicatif::ProgressStyle::with_template("{msg} {wide_bar} {pos}/{len} rows")
                .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        bar
    });
    let commit = tributary::At::Commit(plan.commit.as_str().into());
    let mut file = match args.file.as_str() {
        "-" => None,
        path => Some(Partial::create(Path::new(path))?),
    };
    for (type_name, rows) in &plan.types {
        if let Some(bar) = &progress {
            bar.set_message(format!("exporting {type_name}"));
        }
        let lines = opened.export(type_name, &commit).await?;
        match &mut file {
            Some(file) => file.write(lines.as_bytes())?,
            None => out
                .write_all(lines.as_bytes())
                .map_err(|e| Failure::io(format!("cannot write the export: {e}")))?,
        }
        if let Some(bar) = &progress {
            bar.inc(*rows);
        }
    }
    if let Some(bar) = progress {
        bar.finish_and_clear();
    }
    let summary = output::Summary::new()
        .with("commit", plan.commit.clone())
        .counts("rows", plan.types.iter().map(|(name, rows)| (name, rows)));
    match file {
        Some(file) => {
            let path = file.finish()?;
            summary
                .with("file", path.display().to_string())
                .write(out, format)
                .map_err(Failure::io)
        }
        // The rows went to standard output: the summary goes to a person, if one watches.
        None if std::io::stderr().is_terminal() => {
            eprintln!(
                "exported {total} rows of {} types at commit {}",
                plan.types.len(),
                plan.commit
            );
            Ok(())
        }
        None => Ok(()),
    }
}

/// A file written under a temporary name beside its own and renamed into place once
/// whole, so a failed export leaves nothing under the name asked for.
struct Partial {
    path: PathBuf,
    temporary: PathBuf,
    file: std::io::BufWriter<std::fs::File>,
}

impl Partial {
    fn create(path: &Path) -> Result<Partial, Failure> {
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(".partial");
        let temporary = path.with_file_name(name);
        let file = std::fs::File::create(&temporary).map_err(|e| {
            Failure::cannot_create(format!("cannot create {}: {e}", temporary.display()))
        })?;
        Ok(Partial {
            path: path.to_owned(),
            temporary,
            file: std::io::BufWriter::new(file),
        })
    }

    fn write(&mut self, bytes: &[u8]) -> Result<(), Failure> {
        self.file
            .write_all(bytes)
            .map_err(|e| Failure::io(format!("cannot write {}: {e}", self.temporary.display())))
    }

    fn finish(mut self) -> Result<PathBuf, Failure> {
        let shown = self.temporary.display().to_string();
        let failed = |e: std::io::Error| Failure::io(format!("cannot write {shown}: {e}"));
        self.file.flush().map_err(failed)?;
        self.file.get_ref().sync_all().map_err(failed)?;
        std::fs::rename(&self.temporary, &self.path).map_err(|e| {
            Failure::io(format!(
                "cannot rename {} to {}: {e}",
                self.temporary.display(),
                self.path.display()
            ))
        })?;
        Ok(self.path.clone())
    }
}

impl Drop for Partial {
    fn drop(&mut self) {
        // Gone once renamed; otherwise the export failed and nothing of it stays.
        let _ = std::fs::remove_file(&self.temporary);
    }
}
