//! What the command line prints about itself, before any graph is opened or a runtime
//! started: completion scripts, manual pages, and the HTTP API's OpenAPI document.

use std::io::Write;
use std::path::Path;
use std::process::ExitCode;

use crate::output;

pub(crate) enum Document<'a> {
    Completions(clap_complete::Shell),
    /// One page on stdout, or one per command into a directory.
    Man(Option<&'a Path>),
    Openapi,
}

/// Write `document` of `command` (the command line's own definition); a reader that went
/// away ends it quietly, like a read.
pub(crate) fn print(mut command: clap::Command, document: Document) -> ExitCode {
    let (what, written) = match document {
        Document::Completions(shell) => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut command, "tributary", &mut script);
            ("completion script", write_out(&script))
        }
        Document::Man(None) => (
            "manual page",
            clap_mangen::Man::new(command).render(&mut output::Stdout::lock()),
        ),
        Document::Man(Some(dir)) => ("manual pages", write_man_pages(command, dir)),
        Document::Openapi => {
            // Serializing the document cannot fail short of a bug; reported as the write.
            let text = tributary_server::openapi::document()
                .to_pretty_json()
                .map_err(std::io::Error::other);
            let written = text.and_then(|text| write_out(format!("{text}\n").as_bytes()));
            ("OpenAPI document", written)
        }
    };
    match written {
        Ok(()) => ExitCode::SUCCESS,
        Err(_) if output::Stdout::reader_gone() => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: cannot write the {what}: {e}");
            ExitCode::from(74)
        }
    }
}

fn write_out(bytes: &[u8]) -> std::io::Result<()> {
    let mut out = output::Stdout::lock();
    out.write_all(bytes).and_then(|()| out.flush())
}

/// A manual page for `command` and one for each of its subcommands, nested ones too, named
/// as man(1) expects: `tributary.1`, `tributary-ingest.1`, `tributary-ingest-status.1`.
fn write_man_pages(command: clap::Command, dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    // Built, the global options (--format, --server, ...) are every command's own; without
    // the help subcommand, no page names a `…-help` page that is not written.
    let mut command = command.disable_help_subcommand(true);
    command.build();
    let name = command.get_name().to_owned();
    let mut pending = vec![(name.clone(), name, command)];
    while let Some((file, invoked_as, command)) = pending.pop() {
        for sub in command.get_subcommands() {
            if sub.get_name() != "help" {
                let sub_file = format!("{file}-{}", sub.get_name());
                let sub_invoked_as = format!("{invoked_as} {}", sub.get_name());
                let page = sub
                    .clone()
                    .name(sub_file.clone())
                    .bin_name(sub_invoked_as.clone())
                    .version(env!("CARGO_PKG_VERSION"));
                pending.push((sub_file, sub_invoked_as, page));
            }
        }
        let mut page = std::fs::File::create(dir.join(format!("{file}.1")))?;
        clap_mangen::Man::new(command).render(&mut page)?;
    }
    Ok(())
}
