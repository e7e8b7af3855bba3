"""A labelled set for retrieval by meaning: tools, skills and rules links, 55 queries.

Written for ctxnb's benchmarks (not taken from any data set). Each query names what a
user or an agent would ask, often in other words than the entry's own text; the label is
the one entry that should rank first. About a third of the queries share no content word
with their answer, so BM25 alone cannot find them: that part measures what the embedder
adds; the rest checks that fusing does not lose what words already find.
"""

from __future__ import annotations


def _tool(tool: str, description: str, /, **props: str) -> dict:
    return {
        "name": tool,
        "description": description,
        "inputSchema": {
            "type": "object",
            "properties": {k: {"type": "string", "description": v} for k, v in props.items()},
        },
    }


TOOLS = [
    _tool("github__create_issue", "Open a new issue in a GitHub repository", title="issue title"),
    _tool(
        "github__list_pull_requests", "List open pull requests of a repository", repo="owner/name"
    ),
    _tool(
        "github__merge_pull_request",
        "Merge a pull request into its base branch",
        number="PR number",
    ),
    _tool("github__create_branch", "Create a git branch from a commit", name="branch name"),
    _tool("github__search_code", "Search source code across repositories", query="code search"),
    _tool(
        "slack__post_message", "Post a message to a Slack channel", channel="channel", text="text"
    ),
    _tool("slack__list_channels", "List the Slack channels of the workspace"),
    _tool(
        "calendar__create_event", "Add an event to the calendar", start="start time", title="title"
    ),
    _tool("calendar__list_events", "List calendar events in a time range", day="day"),
    _tool("jira__transition_ticket", "Move a Jira ticket to another status", key="ticket key"),
    _tool(
        "db__run_sql_query", "Run a read-only SQL query against the analytics database", sql="SQL"
    ),
    _tool("db__list_tables", "List the tables and columns of the database"),
    _tool("web__fetch_url", "Fetch a web page and return its text", url="URL"),
    _tool("web__search", "Search the web for pages about a topic", query="search terms"),
    _tool("mail__send_email", "Send an email to one or more recipients", to="address", body="body"),
    _tool("mail__search_inbox", "Find messages in the mailbox", query="search terms"),
    _tool("docker__restart_container", "Restart a running Docker container", name="container"),
    _tool(
        "k8s__scale_deployment",
        "Change the number of replicas of a Kubernetes deployment",
        replicas="count",
    ),
    _tool("k8s__get_pod_logs", "Read the logs of a Kubernetes pod", pod="pod name"),
    _tool(
        "sentry__list_errors", "List recent unresolved errors reported to Sentry", project="project"
    ),
    _tool("weather__get_forecast", "Get the weather forecast for a city", city="city"),
    _tool(
        "translate__translate_text", "Translate text into another language", target="language code"
    ),
    _tool("files__read_file", "Read a file of the workspace and return its text", path="path"),
    _tool(
        "files__write_file", "Write a whole file of the workspace", path="path", content="new text"
    ),
    _tool("files__search", "Grep the workspace files for a regular expression", pattern="regex"),
    _tool("files__history", "List the stored versions of a file", path="path"),
    _tool("files__restore_file", "Put an earlier stored version of a file back", path="path"),
]

TOOL_QUERIES = [
    ("file a bug on our GitHub repo about the crash", "github__create_issue"),
    ("which pull requests are waiting for review", "github__list_pull_requests"),
    ("land PR 42", "github__merge_pull_request"),
    ("start a feature branch for the login work", "github__create_branch"),
    ("where else in our repos is parse_date called", "github__search_code"),
    ("tell the team in #releases that the build is green", "slack__post_message"),
    ("what channels exist in our chat", "slack__list_channels"),
    ("schedule a meeting with Ana on Friday at 10", "calendar__create_event"),
    ("what is on my agenda tomorrow", "calendar__list_events"),
    ("mark PROJ-12 as done", "jira__transition_ticket"),
    ("how many orders did we get last week, from the warehouse", "db__run_sql_query"),
    ("what does the schema of our database look like", "db__list_tables"),
    ("download the page at https://example.org/changelog", "web__fetch_url"),
    ("look up recent articles about CPython 3.14 performance", "web__search"),
    ("mail the report to finance@example.com", "mail__send_email"),
    ("did the vendor reply to my message about invoices", "mail__search_inbox"),
    ("the api container is stuck, bounce it", "docker__restart_container"),
    ("run five replicas of the web deployment", "k8s__scale_deployment"),
    ("why is the worker pod crashing, show its output", "k8s__get_pod_logs"),
    ("which exceptions hit production since yesterday", "sentry__list_errors"),
    ("will it rain in Lisbon this weekend", "weather__get_forecast"),
    ("put this paragraph into German", "translate__translate_text"),
    ("show me what is in src/app.py", "files__read_file"),
    ("find every TODO in the code base", "files__search"),
    ("undo my last change to settings.py", "files__restore_file"),
]

SKILLS = {
    "pdf-forms": "Fill in PDF forms and extract the values of their fields",
    "release-notes": "Write release notes from merged pull requests and the changelog",
    "sql-migrations": "Write and review database schema migrations safely",
    "incident-report": "Draft a post-mortem after an outage: timeline, impact, causes, actions",
    "api-docs": "Document HTTP endpoints with OpenAPI examples",
    "data-cleaning": "Clean tabular data: missing values, duplicates, types, outliers",
    "frontend-a11y": "Check web pages for accessibility: labels, contrast, keyboard use",
    "perf-profiling": "Profile slow Python code and find the hot spots",
    "test-writing": "Write pytest tests with fixtures and parametrization",
    "translations": "Manage gettext translation catalogs and plural forms",
}

SKILL_QUERIES = [
    ("fill out the tax form attached as a PDF", "pdf-forms"),
    ("what changed in this release, for the announcement", "release-notes"),
    ("add a column to the users table without downtime", "sql-migrations"),
    ("we had an outage last night, write it up", "incident-report"),
    ("describe the REST endpoints for our public API", "api-docs"),
    ("this CSV has blanks and repeated rows, tidy it", "data-cleaning"),
    ("can screen reader users navigate the signup page", "frontend-a11y"),
    ("the import script takes ten minutes, why so slow", "perf-profiling"),
    ("cover the parser with unit tests", "test-writing"),
    ("the French strings are missing plurals", "translations"),
    ("templates for the release announcement", "release-notes"),
    ("which functions eat the CPU time", "perf-profiling"),
    ("rename a database column in production", "sql-migrations"),
    ("the contrast of the buttons is too low", "frontend-a11y"),
    ("write a test for the date helper", "test-writing"),
]

# (link target, link text) as they would stand in AGENTS.md files.
LINKS = {
    "docs/style.md": "Python style guide",
    "docs/testing.md": "How we test: fixtures, markers, slow tests",
    "docs/release.md": "Cutting a release and publishing to PyPI",
    "docs/security.md": "Handling secrets and credentials",
    "docs/database.md": "Database conventions and migrations",
    "docs/frontend.md": "Frontend components and CSS conventions",
    "docs/api.md": "HTTP API design rules and versioning",
    "docs/logging.md": "Logging and metrics",
    "docs/deps.md": "Adding or upgrading dependencies",
    "docs/i18n.md": "Internationalization and translations",
    "skills/release-notes/references/templates.md": "templates",
    "docs/ci.md": "Continuous integration pipeline",
}

LINK_QUERIES = [
    ("how should I format this Python module", "docs/style.md"),
    ("where do shared pytest fixtures go", "docs/testing.md"),
    ("publish version 2.1 to the package index", "docs/release.md"),
    ("can I put the API key in the config file", "docs/security.md"),
    ("add an index to the orders table", "docs/database.md"),
    ("make the button component match the design system", "docs/frontend.md"),
    ("we need a v2 of the orders endpoint", "docs/api.md"),
    ("emit a counter when a job fails", "docs/logging.md"),
    ("bump requests to the latest version", "docs/deps.md"),
    ("the German translation is missing", "docs/i18n.md"),
    ("templates", "skills/release-notes/references/templates.md"),
    ("the build on main is red, what runs there", "docs/ci.md"),
    ("where do passwords for the staging database live", "docs/security.md"),
    ("structured logs for the worker", "docs/logging.md"),
    ("rules for versioning our REST endpoints", "docs/api.md"),
]
