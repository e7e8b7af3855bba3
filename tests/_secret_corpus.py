"""A corpus of realistic (invented) secrets and of look-alikes, for redaction tests and bench.

Every value is generated from a seeded random source and assembled from parts at run
time, so nothing in the repository looks like a live credential to a secret scanner,
and the corpus is the same on every run. Each case is one file, named and laid out the
way such a secret is found in real projects (``.env`` lines, nested YAML, call
arguments, JSON service-account files, HTTP headers, PEM blocks, ...).

``SECRETS`` holds cases whose ``secrets`` must all disappear from redacted text;
``LOOKALIKES`` holds cases that look like secrets but are not, and must come back
unchanged. ``write_corpus(dir)`` writes both as files (one per case) and returns the
cases with their file names.
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass
from pathlib import Path

ALNUM = string.ascii_letters + string.digits
LOWER_HEX = "0123456789abcdef"
B64 = ALNUM + "+/"
URLSAFE = ALNUM + "_-"

# Prefixes assembled from parts so that the source text matches no scanner rule.
GH = "gh" + "p_"
GHO = "gh" + "o_"
GHS = "gh" + "s_"
GH_PAT = "github" + "_pat_"
GLPAT = "gl" + "pat-"
AKIA = "AK" + "IA"
ASIA = "AS" + "IA"
SK_PROJ = "sk" + "-proj-"
SK_ANT = "sk" + "-ant-api03-"
XOXB = "xo" + "xb-"
XOXP = "xo" + "xp-"
XAPP = "xa" + "pp-"
SK_LIVE = "sk" + "_live_"
RK_LIVE = "rk" + "_live_"
WHSEC = "wh" + "sec_"
SG = "S" + "G."
HF = "h" + "f_"
NPM = "np" + "m_"
AIZA = "AI" + "za"
PYPI = "pypi" + "-AgEIcHlwaS5vcmc"
DOP = "do" + "p_v1_"
SHPAT = "shp" + "at_"
BEGIN = "-----BEG" + "IN "
END = "-----EN" + "D "
PK = "PRIVATE" + " KEY"


@dataclass(frozen=True)
class Case:
    """One file of the corpus.

    Attributes:
        kind: what the case is (one of at least 25 kinds of secrets, or a look-alike).
        name: the file name it is written under.
        text: the file's content.
        secrets: the values that must not survive redaction (empty for a look-alike).
    """

    kind: str
    name: str
    text: str
    secrets: tuple[str, ...] = ()


class _Gen:
    """Seeded random values; each call gives a new value."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def s(self, n: int, alphabet: str = ALNUM) -> str:
        while True:
            v = "".join(self.rng.choice(alphabet) for _ in range(n))
            # Real tokens mix character classes; a draw without a digit would be a
            # less realistic sample (and rare anyway).
            if alphabet != ALNUM or (any(c.isdigit() for c in v) and not v.isdigit()):
                return v

    def digits(self, n: int) -> str:
        return "".join(self.rng.choice(string.digits) for _ in range(n))

    def pem_body(self, lines: int, width: int = 64) -> str:
        out = [self.s(width, B64) for _ in range(lines)]
        return "\n".join(out + [self.s(width // 3, B64) + "=="])

    def password(self, n: int = 14) -> str:
        core = self.s(n - 2)
        return core[: n // 2] + self.rng.choice("!#%&*+") + core[n // 2 :] + self.digits(1)


def _pem(kind: str, body: str, *, dashes: str = "-----", sep: str = "") -> str:
    if dashes == "-----":
        return f"{BEGIN}{kind}-----\n{body}\n{END}{kind}-----\n"
    return f"---- BEG{sep}IN {kind} ----\n{body}\n---- EN{sep}D {kind} ----\n"


def _jwt(g: _Gen) -> str:
    def part(obj: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).decode().rstrip("=")

    head = part({"alg": "HS256", "typ": "JWT"})
    body = part({"sub": g.digits(8), "name": "Ada", "iat": int(g.digits(10))})
    return f"{head}.{body}.{g.s(43, URLSAFE)}"


def secret_cases(seed: int = 12) -> list[Case]:
    """At least 60 secrets of at least 25 kinds, each in a realistic file."""
    g = _Gen(seed)
    cases: list[Case] = []

    def add(kind: str, name: str, text: str, *secrets: str) -> None:
        cases.append(Case(kind, name, text, secrets))

    v = GH + g.s(36)
    add("github-classic", ".env", f"GITHUB_TOKEN={v}\nDEBUG=1\n", v)
    v = GH + g.s(36)
    add("github-classic", "ci.yml", f"env:\n  deploy:\n    token: {v}\n", v)
    v = GH + g.s(36)
    add("github-classic", "gh.py", f'headers = {{"Authorization": "token {v}"}}\n', v)
    v = GHO + g.s(36)
    add("github-oauth", "auth.json", json.dumps({"oauth": v}) + "\n", v)
    v = GHS + g.s(36)
    add("github-app", "run.sh", f"git clone https://x-access-token:{v}@github.com/o/r\n", v)
    v = GH_PAT + g.s(22) + "_" + g.s(59)
    add("github-fine-grained", ".env", f"GH_PAT={v}\n", v)
    v = GH_PAT + g.s(22) + "_" + g.s(59)
    add("github-fine-grained", "client.py", f'gh = Github(auth=Token("{v}"))\n', v)
    v = GLPAT + g.s(20, URLSAFE)
    add("gitlab-token", ".gitlab-ci.yml", f"variables:\n  GITLAB_TOKEN: {v}\n", v)

    kid, sec = AKIA + g.s(16, string.ascii_uppercase + string.digits), g.s(40, B64)
    add(
        "aws-key-pair",
        "credentials",
        f"[default]\naws_access_key_id = {kid}\naws_secret_access_key = {sec}\n",
        kid,
        sec,
    )
    kid, sec = ASIA + g.s(16, string.ascii_uppercase + string.digits), g.s(40, B64)
    add(
        "aws-key-pair",
        ".env",
        f"AWS_ACCESS_KEY_ID={kid}\nAWS_SECRET_ACCESS_KEY={sec}\nAWS_REGION=eu-west-1\n",
        kid,
        sec,
    )
    kid, sec = AKIA + g.s(16, string.ascii_uppercase + string.digits), g.s(40, B64)
    add(
        "aws-key-pair",
        "s3.py",
        f'boto3.client("s3", aws_access_key_id="{kid}",\n'
        f'             aws_secret_access_key="{sec}")\n',
        kid,
        sec,
    )

    v = SK_PROJ + g.s(74, URLSAFE) + "T3Blbk" + "FJ" + g.s(74, URLSAFE)
    add("openai-project-key", ".env", f"OPENAI_API_KEY={v}\n", v)
    v = SK_PROJ + g.s(58, URLSAFE)
    add("openai-project-key", "bot.py", f'client = OpenAI(api_key="{v}")\n', v)
    v = SK_PROJ + g.s(48, URLSAFE)
    add("openai-project-key", "notes.md", f"Use the key `{v}` for the demo.\n", v)
    v = "sk" + "-" + g.s(20) + "T3Blbk" + "FJ" + g.s(20)
    add("openai-legacy-key", "settings.toml", f'[openai]\nkey = "{v}"\n', v)

    v = SK_ANT + g.s(93, URLSAFE) + "AA"
    add("anthropic-key", ".env", f"ANTHROPIC_API_KEY={v}\n", v)
    v = SK_ANT + g.s(93, URLSAFE) + "AA"
    add("anthropic-key", "agent.py", f"llm = anthropic.Anthropic(api_key='{v}')\n", v)
    v = SK_ANT + g.s(93, URLSAFE) + "AA"
    add(
        "anthropic-key",
        "call.sh",
        f'curl https://api.anthropic.com/v1/messages -H "x-api-key: {v}"\n',
        v,
    )
    v = SK_ANT + g.s(93, URLSAFE) + "AA"
    add("anthropic-key", "log.txt", f"request failed with key {v} (401)\n", v)

    v = XOXB + g.digits(11) + "-" + g.digits(13) + "-" + g.s(24)
    add("slack-bot-token", ".env", f"SLACK_BOT_TOKEN={v}\n", v)
    v = XOXP + g.digits(11) + "-" + g.digits(12) + "-" + g.digits(13) + "-" + g.s(32, LOWER_HEX)
    add("slack-user-token", "slack.py", f'WebClient(token="{v}")\n', v)
    v = XAPP + "1-A" + g.s(10, string.ascii_uppercase + string.digits) + "-"
    v += g.digits(13) + "-" + g.s(64, LOWER_HEX)
    add("slack-app-token", ".env", f"SLACK_APP_TOKEN={v}\n", v)
    tail = f"T{g.s(8, string.ascii_uppercase)}/B{g.s(8, string.ascii_uppercase)}/{g.s(24)}"
    add(
        "slack-webhook",
        "alerts.yaml",
        f"alerts:\n  url: https://hooks.slack.com/services/{tail}\n",
        tail,
    )

    v = SK_LIVE + g.s(99)
    add("stripe-secret-key", "pay.py", f"stripe.api_key = {v!r}\n", v)
    v = RK_LIVE + g.s(99)
    add("stripe-restricted-key", ".env", f"STRIPE_KEY={v}\n", v)
    v = WHSEC + g.s(32)
    add("stripe-webhook-secret", ".env", f"STRIPE_WEBHOOK={v}\n", v)
    v = WHSEC + g.s(32)
    add("stripe-webhook-secret", "hooks.py", f'stripe.Webhook.construct_event(p, s, "{v}")\n', v)

    v = SG + g.s(22, URLSAFE) + "." + g.s(43, URLSAFE)
    add("sendgrid-key", "mail.py", f'sg = SendGridAPIClient("{v}")\n', v)
    v = SG + g.s(22, URLSAFE) + "." + g.s(43, URLSAFE)
    add("sendgrid-key", ".env", f"SENDGRID={v}\n", v)
    v = HF + g.s(34, string.ascii_letters)
    add("huggingface-token", "train.py", f'login(token="{v}")\n', v)
    v = HF + g.s(34, string.ascii_letters)
    add("huggingface-token", ".env", f"HF_HOME=/data/hf\nHUGGING={v}\n", v)
    v = NPM + g.s(36)
    add("npm-token", ".npmrc", f"//registry.npmjs.org/:_authToken={v}\n", v)
    v = PYPI + g.s(70, URLSAFE)
    add("pypi-token", ".pypirc", f"[pypi]\nusername = __token__\npassword = {v}\n", v)
    v = AIZA + g.s(35, URLSAFE)
    add("google-api-key", "maps.js", f'const MAPS = "{v}";\n', v)
    v = DOP + g.s(64, LOWER_HEX)
    add("digitalocean-token", "do.tf", f'provider "digitalocean" {{\n  token = "{v}"\n}}\n', v)
    v = SHPAT + g.s(32, LOWER_HEX)
    add("shopify-token", "shop.rb", f"ShopifyAPI::Session.new(token: '{v}')\n", v)
    v = "GOC" + "SPX-" + g.s(28, URLSAFE)
    add("google-oauth-secret", "client_secret.json", json.dumps({"web": {"client_secret": v}}), v)
    v = "hv" + "s." + g.s(90, URLSAFE)
    add("vault-token", "vault.sh", f"export VAULT_ADDR=https://vault:8200\nvault login {v}\n", v)
    v = "lin" + "_api_" + g.s(40)
    add(
        "linear-api-key", "linear.ts", f"const linear = new LinearClient({{ apiKey: '{v}' }});\n", v
    )
    v = "gl" + "sa_" + g.s(32) + "_" + g.s(8, LOWER_HEX)
    add("grafana-token", "grafana.ini", f"[auth]\nservice_account = {v}\n", v)
    v = "PM" + "AK-" + g.s(24, LOWER_HEX) + "-" + g.s(34, LOWER_HEX)
    add("postman-key", "newman.sh", f"newman run c.json --postman-api-key {v}\n", v)
    v = "da" + "pi" + g.s(32, LOWER_HEX)
    add(
        "databricks-token", ".databrickscfg", f"[DEFAULT]\nhost = https://x.cloud\ntoken = {v}\n", v
    )
    v = "AGE-SECRET" + "-KEY-1" + g.s(58, string.ascii_uppercase + string.digits)
    add("age-secret-key", "keys.txt", f"# created: 2024-01-01\n# public key: age1qyqs\n{v}\n", v)
    v = "ke" + "y-" + g.s(32, LOWER_HEX)
    add("mailgun-key", "mail.rb", f"Mailgun::Client.new('{v}')\n", v)
    v = g.digits(10) + ":AA" + g.s(33, URLSAFE)
    add("telegram-bot-token", "bot.env", f"TELEGRAM={v}\n", v)

    v = g.s(86, B64) + "=="
    add(
        "azure-storage-key",
        "appsettings.json",
        json.dumps(
            {
                "Storage": "DefaultEndpointsProtocol=https;AccountName=acme;"
                f"AccountKey={v};EndpointSuffix=core.windows.net"
            },
            indent=2,
        )
        + "\n",
        v,
    )
    v = g.s(43, B64) + "="
    add(
        "azure-service-bus-key",
        "bus.cs",
        'var conn = "Endpoint=sb://acme.servicebus.windows.net/;SharedAccessKeyName=Root;'
        f'SharedAccessKey={v}";\n',
        v,
    )

    cred = base64.b64encode(f"deploy:{g.password()}".encode()).decode()
    add("http-basic-auth", "req.http", f"GET /api\nAuthorization: Basic {cred}\n", cred)
    v = g.s(40, URLSAFE)
    add("http-bearer-token", "req.http", f"POST /v1\nAuthorization: Bearer {v}\n", v)
    v = g.s(32, URLSAFE)
    add(
        "http-bearer-token",
        "api.py",
        f'requests.get(u, headers={{"Authorization": "Bearer {v}"}})\n',
        v,
    )
    v = _jwt(g)
    add("jwt", "session.txt", f"cookie: session={v}; Path=/\n", v)
    v = _jwt(g)
    add("jwt", "test_api.py", f'TOKEN = "{v}"\n', v)

    pw = g.password()
    add("database-url", ".env", f"DATABASE_URL=postgres://app:{pw}@db.internal:5432/app\n", pw)
    pw = g.password(16)
    add(
        "database-url", "settings.py", f'MONGO = "mongodb+srv://admin:{pw}@cluster0.x.net/db"\n', pw
    )
    pw = g.s(20)
    add(
        "database-url",
        "docker-compose.yml",
        f"    environment:\n      - REDIS_URL=redis://:{pw}@redis:6379/0\n",
        pw,
    )
    pw = g.password(12)
    add(
        "database-url",
        "alembic.ini",
        f"sqlalchemy.url = mysql+pymysql://root:{pw}@localhost/db\n",
        pw,
    )

    pw = g.password()
    add(
        "yaml-nested-password",
        "config.yaml",
        f"database:\n  primary:\n    user: app\n    password: {pw}\n",
        pw,
    )
    pw = g.password(10)
    add("yaml-nested-password", "values.yaml", f'postgresql:\n  auth:\n    password: "{pw}"\n', pw)
    v = g.s(32, LOWER_HEX)
    add("unquoted-env-value", ".env", f"API_TOKEN={v}\n", v)
    v = g.s(40)
    add("unquoted-env-value", "prod.env", f"export SECRET_KEY={v}\n", v)
    v = g.s(24)
    add("unquoted-env-value", "deploy.sh", f"DEPLOY_TOKEN={v} ./deploy.sh\n", v)
    pw = g.password(12)
    add(
        "call-argument",
        "db.py",
        f'conn = psycopg2.connect(host="db", user="app", password="{pw}")\n',
        pw,
    )
    v = g.s(32)
    add("call-argument", "client.py", f'client = Client(api_key="{v}", timeout=30)\n', v)
    v = g.s(48, URLSAFE)
    add("call-argument", "app.js", f"const c = new Client({{ apiKey: '{v}' }});\n", v)
    v = g.s(32, LOWER_HEX)
    add("generic-api-key", "datadog.yaml", f"api_key: {v}\nsite: datadoghq.eu\n", v)
    v = g.s(50, ALNUM + "!@#$%^&*(-_=+)")
    add("django-secret-key", "settings.py", f"SECRET_KEY = '{v}'\n", v)
    pw = g.password()
    add("xml-password", "web.config", f'<add key="DbPassword" value="{pw}" />\n', pw)
    pw = g.password()
    add(
        "xml-password",
        "settings.xml",
        f"<server>\n  <id>r</id>\n  <password>{pw}</password>\n</server>\n",
        pw,
    )
    pw = g.password()
    add("cli-flag-password", "backup.sh", f"mysqldump --user=root --password={pw} db > d.sql\n", pw)
    pw = g.password()
    add("netrc-password", ".netrc", f"machine api.example.com\n  login bot\n  password {pw}\n", pw)
    v = base64.b64encode(f"bot:{g.password()}".encode()).decode()
    add(
        "docker-auth",
        "config.json",
        json.dumps({"auths": {"ghcr.io": {"auth": v}}}, indent=2) + "\n",
        v,
    )
    v = g.s(32)
    add("client-secret", "oauth.tf", f'  client_secret = "{v}"\n', v)

    kinds = [
        ("RSA " + PK, 64),
        ("DSA " + PK, 64),
        ("EC " + PK, 64),
        ("OPENSSH " + PK, 70),
        (PK, 64),
        ("ENCRYPTED " + PK, 64),
        ("PGP " + PK + " BLOCK", 64),
    ]
    for kind, width in kinds:
        body = g.pem_body(8, width)
        add(
            f"pem-{kind.split()[0].lower() if kind != PK else 'pkcs8'}",
            "key.pem",
            _pem(kind, body),
            body,
        )
    body = g.pem_body(8, 70)
    add("pem-ssh2", "id_ssh2", _pem("SSH2 ENCRYPTED " + PK, body, dashes="----"), body)

    body = g.pem_body(10)
    sa = {
        "type": "service_account",
        "project_id": "acme-prod",
        "private_key_id": g.s(40, LOWER_HEX),
        "private_key": f"{BEGIN}{PK}-----\n{body}\n{END}{PK}-----\n",
        "client_email": "ci@acme-prod.iam.gserviceaccount.com",
    }
    add(
        "gcp-service-account", "sa.json", json.dumps(sa, indent=2) + "\n", body.replace("\n", "\\n")
    )
    cases += format_cases(g)
    return cases


def format_cases(g: _Gen) -> list[Case]:
    """Secrets found by reading a file's format (#29): low-entropy values under secret
    keys, values with spaces and punctuation, and the structures patterns do not parse."""
    cases: list[Case] = []

    def add(kind: str, name: str, text: str, *secrets: str) -> None:
        cases.append(Case(kind, name, text, secrets))

    words = ["cobalt", "meadow", "lantern", "pebble", "saffron", "glacier"]

    def human() -> str:
        a, b = g.rng.sample(words, 2)
        return f"{a.title()}{g.rng.choice('-._ ')}{b}{g.digits(2)}"

    v = human()
    add("fmt-dotenv", ".env", f"APP=1\nDB_PASSWORD='{v}'\n", v)
    v = human().replace(" ", "-")
    add("fmt-ini", "app.ini", f"[mail]\nhost = smtp\nsmtp_password = {v}\n", v)
    v = human()
    add("fmt-toml", "conf.toml", f'[auth]\nclient_secret = "{v}"\n', v)
    body = g.pem_body(3)
    indented = "\n".join("    " + ln for ln in body.split("\n"))
    add(
        "fmt-yaml-block",
        "tls.yaml",
        f"tls:\n  key: |\n    {BEGIN}EC {PK}-----\n{indented}\n    {END}EC {PK}-----\n",
        *body.split("\n"),
    )
    v1, v2 = g.s(14), g.s(14)
    add("fmt-yaml-folded", "app.yaml", f"app:\n  signing_secret: >-\n    {v1}\n    {v2}\n", v1, v2)
    v = 'Qx"' + g.s(8) + "\\z"
    add("fmt-json-escape", "cfg.json", json.dumps({"password": v}), json.dumps(v)[1:-1])
    v = human().replace(" ", "_")
    add("fmt-dockerfile", "Dockerfile", f"FROM alpine\nENV ADMIN_PASSWORD {v}\n", v)
    v = g.s(10)
    add("fmt-cli-p", "dump.sh", f"mysqldump -u root -p{v} app > app.sql\n", v)
    v = human().replace(" ", "")
    add("fmt-cli-password", "login.sh", f"podman login --password {v} quay.local\n", v)
    v = g.s(9)
    add("fmt-cli-user", "get.sh", f"curl -sS -u deploy:{v} https://ci.local/api\n", v)
    v = human()
    add("fmt-php", "config.php", f"<?php\ndefine('DB_PASSWORD', '{v}');\n", v)
    a, b = g.s(8), g.s(8)
    add("fmt-python-concat", "k.py", f'API_SECRET = "{a}" + "{b}"\n', a, b)
    a, b = g.s(8), g.s(8)
    add("fmt-js-concat", "k.js", f"const authToken = '{a}' + '{b}';\n", a, b)
    v = g.s(5) + "@" + g.s(4) + ":/#" + g.s(3)
    add("fmt-url-odd-password", "db.env", f"DATABASE_URL=postgres://app:{v}@db.local:5432/app\n", v)
    v = g.s(12)
    add("fmt-dsn", "conn.txt", f"Server=sql;Database=app;User Id=sa;Password={v};\n", v)
    v = g.s(12)
    add("fmt-jdbc", "jdbc.properties", f"url=jdbc:postgresql://db/app?user=a&password={v}\n", v)
    raw = human().encode()
    v = base64.b64encode(raw).decode()
    add(
        "fmt-k8s-secret",
        "secret.yaml",
        f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ndata:\n  conn: {v}\n",
        v,
    )
    a, b = human(), g.s(12)
    add("fmt-tsv", "users.tsv", f"user\tpassword\tteam\nops\t{a}\tcore\nci\t{b}\tinfra\n", a, b)
    v = g.s(20)
    add("fmt-csv", "keys.csv", f"service,api_key\nbilling,{v}\n", v)
    # Shapes of gitleaks' own rule samples (GenerateSampleSecrets).
    v = g.s(24)
    add("fmt-go-typed-var", "cfg.go", f'var stripeToken string = "{v}"\n', v)
    v = g.s(24)
    add("fmt-php-concat-assign", "cfg.php", f'<?php\n$apiToken .= "{v}";\n', v)
    a, b = g.s(24), g.s(24)
    add("fmt-make-assign", "Makefile", f'DEPLOY_TOKEN ::= "{a}"\nCI_TOKEN ?= "{b}"\n', a, b)
    v = g.s(24)
    add("fmt-xml-multiline", "settings.xml", f"<apiToken>\n    {v}\n</apiToken>\n", v)
    return cases


def lookalike_cases(seed: int = 21) -> list[Case]:
    """At least 30 values that look like secrets and are not."""
    g = _Gen(seed)
    out: list[Case] = []

    def add(kind: str, name: str, text: str) -> None:
        out.append(Case(kind, name, text))

    add("git-sha", "CHANGES.md", f"Fixed in {g.s(40, LOWER_HEX)}, see #12.\n")
    add("git-log", "log.txt", f"commit {g.s(40, LOWER_HEX)}\nAuthor: A <a@b.c>\n")
    add("sha256", "SHA256SUMS", f"{g.s(64, LOWER_HEX)}  ctxnb-0.1.tar.gz\n")
    add("checksum-field", "lock.toml", f'checksum = "{g.s(64, LOWER_HEX)}"\n')
    add(
        "sri-hash",
        "index.html",
        f'<script src="a.js" integrity="sha384-{g.s(64, B64)}"></script>\n',
    )
    add("npm-integrity", "package-lock.json", f'"integrity": "sha512-{g.s(86, B64)}=="\n')
    add("go-sum", "go.sum", f"github.com/x/y v1.2.3 h1:{g.s(43, B64)}=\n")
    add("docker-digest", "Dockerfile", f"FROM python:3.12@sha256:{g.s(64, LOWER_HEX)}\n")
    uid = "-".join(g.s(n, LOWER_HEX) for n in (8, 4, 4, 4, 12))
    add("uuid", "ids.py", f'REQUEST_ID = "{uid}"\n')
    add("uuid-token-name", "models.py", f'token_id = "{uid}"\n')
    png = base64.b64encode(bytes(g.rng.randrange(256) for _ in range(120))).decode()
    add("data-uri", "style.css", f".logo {{ background: url(data:image/png;base64,{png}); }}\n")
    add("base64-image-json", "fixtures.json", json.dumps({"thumbnail": png}) + "\n")
    add("password-reset-path", "urls.py", 'password_reset_path = "/accounts/password/reset/"\n')
    add("token-url", "oauth.py", 'TOKEN_URL = "https://oauth2.googleapis.com/token"\n')
    add("placeholder", ".env.example", "API_KEY=<your-api-key-here>\nSECRET_KEY=changeme\n")
    add("env-reference", "settings.py", 'SECRET_KEY = os.environ["DJANGO_SECRET_KEY"]\n')
    add("template", "deploy.yaml", "password: ${DB_PASSWORD}\ntoken: {{ vault_token }}\n")
    add("stripe-publishable", "checkout.js", f'Stripe("pk_live_{g.s(24)}");\n')
    add("settings-reference", "conf.py", "api_key = settings.STRIPE_API_KEY\n")
    add("getpass", "cli.py", 'password = getpass.getpass("Password: ")\n')
    add("token-type", "oauth.py", 'token_type = "bearer"\nexpires_in = 3600\n')
    add("password-label", "en.yaml", 'password_label: "Password (at least 12 characters)"\n')
    add("tokenizer", "nlp.py", 'tokenizer = AutoTokenizer.from_pretrained("bert-base-uncased")\n')
    add("secret-env-name", "config.py", 'secret_key_name = "DJANGO_SECRET_KEY"\n')
    add("bearer-template", "api.py", 'headers = {"Authorization": f"Bearer {token}"}\n')
    add("aws-arn", "policy.json", '{"Resource": "arn:aws:iam::123456789012:role/deploy"}\n')
    add("url-no-password", "settings.py", 'DATABASE_URL = "postgres://app@localhost:5432/app"\n')
    add("token-regex", "lexer.py", 'TOKEN_PATTERN = r"[A-Za-z0-9_]{32,}"\n')
    add("token-expiry", "models.py", 'session_token_expiry = "2024-01-01T00:00:00Z"\n')
    add(
        "long-identifier",
        "beans.java",
        "AbstractSingletonProxyFactoryBeanDefinitionRegistry registry;\n",
    )
    add("css-colors", "theme.css", ".a { color: #a1b2c3; border-color: #ff00aa; }\n")
    add("md5-cache-key", "cache.py", f'cache_key = "user:{g.digits(6)}:{g.s(32, LOWER_HEX)}"\n')
    add(
        "public-cert",
        "ca.pem",
        f"{BEGIN}CERTIFICATE-----\n{g.pem_body(6)}\n{END}CERTIFICATE-----\n",
    )
    add(
        "ssh-public-key",
        "id_ed25519.pub",
        f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{g.s(43, B64)} a@b\n",
    )
    add("max-tokens", "llm.py", "max_tokens: int = 4096\ntemperature = 0.2\n")
    add("password-compare", "auth.py", "if password == user.password:\n    return True\n")
    # Tables whose secret-named column holds no secret, or whose "header" is prose.
    add("token-append", "lexer.py", "        self.token += nextchar\n        $token .= $char\n")
    add("table-policy-column", "rules.csv", "name,password_policy\nadmins,min 16 chars and 2FA\n")
    add(
        "table-prose",
        "notes.txt",
        "Reset the password, then the token.\nDone, then check, twice.\n",
    )
    return out


SECRETS: list[Case] = secret_cases()
LOOKALIKES: list[Case] = lookalike_cases()


def write_corpus(root: Path) -> list[tuple[Path, Case]]:
    """Write every case as its own file under ``root`` (one directory per case)."""
    written = []
    for i, case in enumerate([*SECRETS, *LOOKALIKES]):
        sub = root / ("secret" if case.secrets else "lookalike") / f"{i:03d}-{case.kind}"
        sub.mkdir(parents=True, exist_ok=True)
        path = sub / case.name
        path.write_text(case.text, encoding="utf-8")
        written.append((path, case))
    return written
