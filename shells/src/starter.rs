//! The newcomer's commands: `crawlfleet init DIR` (a commented starter configuration, a seed
//! file and a small site to crawl, with the commands that run them), `crawlfleet completions
//! SHELL` and `crawlfleet man`, both generated from the command line's clap definitions.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::CommandFactory;

/// Arguments of `crawlfleet init`.
#[derive(Debug, clap::Args)]
pub struct InitArgs {
    /// The directory to write into (created if missing; files already there are kept unless
    /// --force).
    pub dir: PathBuf,
    /// The port the starter's site is served on (127.0.0.1).
    #[arg(long, default_value_t = 8081)]
    pub port: u16,
    /// Overwrite files that exist.
    #[arg(long)]
    pub force: bool,
}

/// Arguments of `crawlfleet completions`.
#[derive(Debug, clap::Args)]
pub struct CompletionsArgs {
    /// The shell.
    pub shell: clap_complete::Shell,
}

/// Arguments of `crawlfleet man`.
#[derive(Debug, clap::Args)]
pub struct ManArgs {
    /// Write one page per subcommand (crawlfleet.1, crawlfleet-up.1, ...) into this directory
    /// instead of printing the main page.
    #[arg(long)]
    pub dir: Option<PathBuf>,
}

/// Prints the completion script of a shell.
pub fn completions(args: &CompletionsArgs) -> Result<ExitCode, String> {
    let mut cmd = crate::cli::Cli::command();
    let mut out = Vec::new();
    clap_complete::generate(args.shell, &mut cmd, "crawlfleet", &mut out);
    print_all(&out)
}

/// Prints the man page, or writes every page into a directory.
pub fn man(args: &ManArgs) -> Result<ExitCode, String> {
    let cmd = crate::cli::Cli::command();
    if let Some(dir) = &args.dir {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        clap_mangen::generate_to(cmd, dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        println!("man pages written to {}", dir.display());
        return Ok(ExitCode::SUCCESS);
    }
    let mut out = Vec::new();
    clap_mangen::Man::new(cmd)
        .render(&mut out)
        .map_err(|e| e.to_string())?;
    print_all(&out)
}

/// Writes to standard output; a closed pipe (`| head`) ends the program normally.
fn print_all(bytes: &[u8]) -> Result<ExitCode, String> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(format!("cannot write: {e}")),
    }
}

/// Writes the starter into `args.dir` and prints how to run it.
pub fn init(args: &InitArgs) -> Result<ExitCode, String> {
    let dir = &args.dir;
    std::fs::create_dir_all(dir.join("site"))
        .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // Absolute, so that the configuration works from any working directory.
    let abs = std::fs::canonicalize(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let port = args.port;
    let seeds = abs.join("seeds.txt");
    let files: [(PathBuf, String); 5] = [
        (abs.join("collection.xml"), starter_xml(port, &seeds)),
        (
            seeds.clone(),
            format!(
                "# More start URIs for collection.xml (its start_uri_files): one absolute URI a line.\nhttp://127.0.0.1:{port}/hello.html\n"
            ),
        ),
        (abs.join("site/index.html"), page("Home", "<a href=\"hello.html\">Hello</a> and <a href=\"about.html\">about</a>.")),
        (abs.join("site/hello.html"), page("Hello", "The seed file's page. <a href=\"/\">Home</a>.")),
        (abs.join("site/about.html"), page("About", "A starter site for crawlfleet. <a href=\"/\">Home</a>.")),
    ];
    for (path, text) in &files {
        if path.exists() && !args.force {
            println!("kept {} (it exists; --force overwrites)", path.display());
            continue;
        }
        std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        println!("wrote {}", path.display());
    }
    let d = abs.display();
    println!(
        "\nRun them (python3 serves the site; stop everything with Ctrl-C):\n\
         \n  python3 -m http.server {port} --bind 127.0.0.1 --directory {d}/site &\n  \
         crawlfleet config check {d}/collection.xml\n  \
         crawlfleet up --config {d}/collection.xml --data-dir {d}/data --until-idle\n\
         \nThen edit {d}/collection.xml to crawl your own sites (docs/collection-config.md)."
    );
    Ok(ExitCode::SUCCESS)
}

fn page(title: &str, body: &str) -> String {
    format!("<!DOCTYPE html>\n<html><head><title>{title}</title></head>\n<body><h1>{title}</h1><p>{body}</p></body></html>\n")
}

fn starter_xml(port: u16, seeds: &Path) -> String {
    format!(
        r#"<?xml version="1.0" encoding="utf-8"?>
<!-- A starter collection written by `crawlfleet init`. Check it with
     `crawlfleet config check collection.xml`; every setting is in docs/collection-config.md. -->
<CrawlerConfig>
  <!-- One DomainSpecification per collection; its name is the collection's. -->
  <DomainSpecification name="starter">
    <!-- Where the crawl starts: absolute http(s) URIs. -->
    <attrib name="start_uris" type="list-string">
      <member>http://127.0.0.1:{port}/</member>
    </attrib>
    <!-- Files of more start URIs, one a line. -->
    <attrib name="start_uri_files" type="list-string">
      <member>{seeds}</member>
    </attrib>
    <!-- Hosts the crawl stays on (plain names are exact; suffix:.example.com for a domain). -->
    <attrib name="include_domains" type="list-string">
      <member>127.0.0.1</member>
    </attrib>
    <!-- Seconds between two requests to one site: be polite to sites that are not yours. -->
    <attrib name="delay" type="real">0.1</attrib>
    <!-- Requests in flight to one site. -->
    <attrib name="max_pending" type="integer">2</attrib>
    <!-- Obey robots.txt. -->
    <attrib name="robots" type="boolean">yes</attrib>
    <!-- How far from the start URIs: FULL, or DEPTH:n links. -->
    <section name="crawlmode">
      <attrib name="mode" type="string">DEPTH:3</attrib>
    </section>
  </DomainSpecification>
</CrawlerConfig>
"#,
        seeds = xml_text(&seeds.display().to_string())
    )
}

fn xml_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
