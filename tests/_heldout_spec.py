"""A held-out redaction corpus: realistic files written from this spec, not from the rules.

This module was written before the format-aware redaction of #29 and independently of
``ctxnb/redaction/_patterns.py`` and of ``tests/_secret_corpus.py``: it describes, file by
file, where credentials sit in real projects (service-account JSON, docker-compose,
Kubernetes manifests, ``.npmrc``, ``.pypirc``, JDBC/ODBC strings, curl commands, CI
YAML, Terraform, shell, PHP/Python/JS sources, INI/TOML/dotenv, YAML block scalars,
JSON-escaped logs) and which look-alikes sit beside them (placeholders, references,
hashes, UUIDs, test fixtures, the published AWS example keys). Its seed and shapes are
not those of the test corpus, so figures measured on it are not figures of the rules
grading themselves.

Every value is drawn from a seeded random source and token prefixes are assembled from
parts at run time, so nothing here is a real credential or looks like one to a scanner.

``heldout_cases()`` returns ``(secrets, lookalikes)``; each case is one file with the
exact values that must not survive (``secrets``) or none (a look-alike must come back
byte for byte).

It lived in ``bench/`` until #43 and moved here beside the #43 spec
(``tests/_heldout_shapes.py``) so that a test measures it too; ``bench/redact.py`` reads
both from here. ``tests/redaction/test_redact_heldout.py`` pins what both generate: the
pins are the output of each spec as first committed (c054b59 and a7e14ec), before the
rules they measure (320e75a and 981a845).
"""

from __future__ import annotations

import base64
import json
import random
import string
from dataclasses import dataclass

AL = string.ascii_letters + string.digits
HEX = "0123456789abcdef"
B64 = AL + "+/"
URLS = AL + "_-"
UP = string.ascii_uppercase + string.digits


@dataclass(frozen=True)
class HeldCase:
    """One file: what it is, its name, its text, the values that must disappear."""

    kind: str
    name: str
    text: str
    secrets: tuple[str, ...] = ()


class _R:
    def __init__(self, seed: int) -> None:
        self.r = random.Random(seed)

    def s(self, n: int, alphabet: str = AL) -> str:
        while True:
            v = "".join(self.r.choice(alphabet) for _ in range(n))
            if alphabet != AL or (any(c.isdigit() for c in v) and any(c.isalpha() for c in v)):
                return v

    def word_pw(self) -> str:
        """A human password: words, a digit, punctuation, sometimes a space."""
        words = ["maple", "orbit", "tundra", "violet", "copper", "falcon", "harbor", "quartz"]
        a, b = self.r.sample(words, 2)
        sep = self.r.choice(["-", ".", " ", "_", "!"])
        return f"{a.capitalize()}{sep}{b}{self.r.randrange(10, 99)}"

    def odd_pw(self) -> str:
        """A password with the characters that break naive patterns: @ : / # ; ? & %."""
        core = self.s(6)
        return f"{core[:3]}@{core[3:]}:/#{self.s(3)}?&%{self.r.randrange(10)}"

    def pem(self, kind: str = "RSA PRIVATE KEY", lines: int = 8, indent: str = "") -> str:
        body = [self.s(64, B64) for _ in range(lines)] + [self.s(20, B64) + "=="]
        head = "-----BEG" + f"IN {kind}-----"
        tail = "-----EN" + f"D {kind}-----"
        return "\n".join(indent + ln for ln in (head, *body, tail))


def heldout_cases(seed: int = 2929) -> tuple[list[HeldCase], list[HeldCase]]:
    """The held-out secrets and look-alikes (at least 100 and 45)."""
    g = _R(seed)
    sec: list[HeldCase] = []
    look: list[HeldCase] = []

    def add(kind: str, name: str, text: str, *secrets: str) -> None:
        sec.append(HeldCase(kind, name, text, secrets))

    def alike(kind: str, name: str, text: str) -> None:
        look.append(HeldCase(kind, name, text))

    ghp = "gh" + "p_"
    akia = "AK" + "IA"
    # --- service-account JSON (private key with \n escapes, client secret) ----------
    pem = g.pem("PRIVATE KEY", 10)
    sa = {
        "type": "service_account",
        "project_id": "billing-prod-31",
        "private_key_id": g.s(40, HEX),
        "private_key": pem + "\n",
        "client_email": "ci@billing-prod-31.iam.gserviceaccount.com",
        "client_id": "1" + g.s(20, string.digits),
    }
    add("service-account-json", "sa.json", json.dumps(sa, indent=2), *pem.split("\n")[1:-1])
    cs = g.s(24, URLS)
    oauth = {"installed": {"client_id": "9.apps.example", "client_secret": cs}}
    add("oauth-client-json", "client_secret.json", json.dumps(oauth), cs)
    # --- JSON with escapes ---------------------------------------------------------
    pw = 'Rk"9' + g.s(8) + "\\q"
    add(
        "json-escaped-quote",
        "config.json",
        json.dumps({"db": {"user": "app", "password": pw}}, indent=1),
        json.dumps(pw)[1:-1],
    )
    env_inside = f"DB_PASS={g.word_pw()}"
    add(
        "json-escaped-log",
        "events.jsonl",
        json.dumps({"event": "spawn", "stdin": f"export {env_inside}\nrun\n"}) + "\n",
        env_inside.split("=", 1)[1],
    )
    # --- dotenv / INI / TOML / properties ---------------------------------------------
    v = g.word_pw()
    add("dotenv-low-entropy", ".env", f"APP_ENV=prod\nDB_PASSWORD='{v}'\n", v)
    v = g.odd_pw()
    add("dotenv-odd-chars", ".env.production", f'SMTP_PASSWORD="{v}"\nSMTP_PORT=587\n', v)
    v = "hunter" + str(g.r.randrange(10, 99))
    add("dotenv-bare-word", ".env", f"export ADMIN_PASS={v}\n", v)
    v = g.s(18)
    add("ini-section", "app.ini", f"[database]\nhost = db.internal\npassword = {v}\n", v)
    v = g.word_pw()
    add("ini-spaces", "settings.cfg", f"[mail]\nsmtp_password = {v}\nsmtp_user = ops\n", v)
    v = g.s(32, URLS)
    add("toml-table", "config.toml", f'[service.auth]\nclient_secret = "{v}"\nretries = 3\n', v)
    v1, v2 = g.s(12), g.s(12)
    add("toml-multiline", "pyproject.toml", f'[tool.x]\npassword = """\n{v1}\n{v2}"""\n', v1, v2)
    v = g.word_pw()
    add("properties", "application.properties", f"spring.datasource.password={v}\n", v)
    v = g.s(20)
    add("properties-colon", "gradle.properties", f"signing.password: {v}\n", v)
    # --- YAML: plain, quoted, block scalars, anchors ----------------------------------
    v = g.word_pw()
    add("yaml-plain", "values.yaml", f"postgres:\n  auth:\n    password: {v}\n", v)
    pem = g.pem("EC PRIVATE KEY", 3, indent="    ")
    add(
        "yaml-block-pem",
        "tls.yaml",
        f"tls:\n  key: |\n{pem}\n  cert_file: /etc/tls.crt\n",
        *[ln.strip() for ln in pem.split("\n")[1:-1]],
    )
    v1, v2 = g.s(16), g.s(16)
    add(
        "yaml-block-folded",
        "secrets.yaml",
        f"app:\n  api_secret: >-\n    {v1}\n    {v2}\n  port: 80\n",
        v1,
        v2,
    )
    v = g.s(14)
    add("yaml-quoted-spaces", "conf.yml", f'smtp:\n  password: "{v} {g.s(4)}"\n', v)
    # --- docker-compose, Dockerfile ----------------------------------------------------
    v = g.word_pw()
    add(
        "compose-env-list",
        "docker-compose.yml",
        f"services:\n  db:\n    image: postgres:16\n    environment:\n"
        f"      - POSTGRES_PASSWORD={v}\n      - POSTGRES_DB=app\n",
        v,
    )
    v = g.s(22)
    add(
        "compose-env-map",
        "compose.yaml",
        f"services:\n  api:\n    environment:\n      JWT_SECRET: {v}\n      PORT: 8080\n",
        v,
    )
    v = g.s(16)
    add("dockerfile-env", "Dockerfile", f"FROM node:20\nENV NPM_TOKEN={v}\nRUN npm ci\n", v)
    v = g.word_pw()
    add("dockerfile-env-space", "Dockerfile", f"FROM mysql:8\nENV MYSQL_ROOT_PASSWORD {v}\n", v)
    v = g.s(20)
    add("dockerfile-arg", "Dockerfile", f"ARG API_KEY={v}\nRUN ./fetch.sh\n", v)
    # --- Kubernetes ------------------------------------------------------------------
    raw = g.word_pw()
    b = base64.b64encode(raw.encode()).decode()
    b2 = base64.b64encode(g.s(12).encode()).decode()
    add(
        "k8s-secret-data",
        "secret.yaml",
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: db\ntype: Opaque\ndata:\n"
        f"  username: {base64.b64encode(b'app').decode()}\n  password: {b}\n  dsn: {b2}\n",
        b,
        b2,
    )
    v = g.s(18)
    add(
        "k8s-secret-stringdata",
        "secret2.yaml",
        f"apiVersion: v1\nkind: Secret\nmetadata:\n  name: api\nstringData:\n  config: {v}\n",
        v,
    )
    v = g.word_pw()
    add(
        "k8s-deployment-env",
        "deploy.yaml",
        "spec:\n  containers:\n    - name: api\n      env:\n"
        f"        - name: DB_PASSWORD\n          value: {v}\n",
        v,
    )
    # --- .npmrc, .pypirc, netrc, git credentials ---------------------------------------
    v = g.s(36)
    add("npmrc-authtoken", ".npmrc", f"//npm.pkg.github.com/:_authToken={v}\n", v)
    v = base64.b64encode(f"ci:{g.s(10)}".encode()).decode()
    add("npmrc-auth", ".npmrc", f"registry=https://nexus.local/\n_auth={v}\n", v)
    v = g.word_pw()
    add(
        "pypirc",
        ".pypirc",
        f"[distutils]\nindex-servers = corp\n[corp]\nrepository = https://pypi.corp\n"
        f"username = deploy\npassword = {v}\n",
        v,
    )
    v = g.odd_pw()
    add("git-credentials", ".git-credentials", f"https://ops:{_q(v)}@git.corp.local\n", _q(v))
    # --- URLs, DSNs, connection strings -----------------------------------------------
    v = g.odd_pw()
    add("url-odd-password", "db.py", f'DSN = "postgresql://svc:{v}@pg.local:5432/app"\n', v)
    v = g.s(16)
    add("redis-url-no-user", "cache.env", f"REDIS_URL=redis://:{v}@cache:6379/0\n", v)
    v = g.s(12)
    add("mongo-srv", "mongo.js", f"const uri = 'mongodb+srv://app:{v}@cl0.x.mongodb.net/db';\n", v)
    v = g.s(14)
    add(
        "jdbc-query-password",
        "jdbc.properties",
        f"url=jdbc:mysql://db:3306/shop?user=shop&password={v}&useSSL=true\n",
        v,
    )
    v = g.s(12)
    add("jdbc-oracle-thin", "ora.conf", f"conn=jdbc:oracle:thin:scott/{v}@//ora:1521/XE\n", v)
    v = g.word_pw()
    add(
        "odbc-braces",
        "odbc.txt",
        f"Driver={{ODBC Driver 18}};Server=sql;UID=sa;PWD={{{v};x}};Encrypt=yes\n",
        f"{v};x",
    )
    v = g.odd_pw().replace(";", "")
    add(
        "ado-connection-string",
        "appsettings.json",
        json.dumps(
            {"ConnectionStrings": {"Main": f"Server=sql;User Id=app;Password={v};Trusted=no"}}
        ),
        json.dumps(v)[1:-1],
    )
    v = g.s(12)
    add(
        "libpq-keywords",
        "pg.sh",
        f'psql "host=db port=5432 dbname=app user=app password={v} sslmode=require"\n',
        v,
    )
    v = g.s(40, URLS)
    add("url-query-token", "hooks.txt", f"https://api.example.net/v1/push?access_token={v}\n", v)
    v = g.s(30, URLS)
    add("url-user-token", "clone.sh", f"git clone https://{v}@git.example.org/acme/repo.git\n", v)
    # --- shell and CLI flags --------------------------------------------------------
    v = g.word_pw().replace(" ", "_")
    add("curl-user", "call.sh", f"curl -u admin:{v} https://jira.local/rest/api/2/issue\n", v)
    v = g.s(20)
    add(
        "curl-header-apikey",
        "call.sh",
        f"curl -H 'X-API-Key: {v}' https://api.local/v1/items\n",
        v,
    )
    v = g.s(10)
    add("mysql-p-attached", "backup.sh", f"mysqldump -uroot -p{v} shop > shop.sql\n", v)
    v = g.word_pw().replace(" ", "")
    add("cli-password-flag", "login.sh", f"docker login -u ci --password {v} registry.local\n", v)
    v = g.s(12)
    add("cli-password-equals", "run.sh", f"./deploy --db-password={v} --verbose\n", v)
    v = g.s(11)
    add("sshpass", "ssh.sh", f"sshpass -p {v} ssh ops@10.0.0.4 uptime\n", v)
    v = g.s(16)
    add("env-prefix-command", "run.sh", f"PGPASSWORD={v} psql -h db -U app\n", v)
    v1, v2 = g.s(8), g.s(8)
    add(
        "shell-continuation",
        "deploy.sh",
        f'helm upgrade app ./chart \\\n  --set db.password="{v1}{v2}" \\\n  --wait\n',
        v1 + v2,
    )
    v = g.s(24)
    add("powershell", "setup.ps1", f'$env:API_TOKEN = "{v}"\n', v)
    # --- code: PHP, Python, JS, Go, Ruby, Java, C# -----------------------------------
    v = g.word_pw()
    add("php-define", "wp-config.php", f"<?php\ndefine('DB_PASSWORD', '{v}');\n", v)
    v = g.word_pw()
    add("php-array", "config.php", f"<?php\nreturn ['db' => ['password' => '{v}']];\n", v)
    a, b = g.s(9), g.s(9)
    add("php-concat", "secret.php", f"<?php\n$secret = '{a}' . '{b}';\n", a, b)
    v = g.word_pw()
    add(
        "python-low-entropy",
        "settings.py",
        f'DATABASES = {{"default": {{"PASSWORD": "{v}"}}}}\n',
        v,
    )
    a, b = g.s(10), g.s(10)
    add("python-concat", "keys.py", f'API_SECRET = "{a}" + "{b}"\n', a, b)
    a, b = g.s(10), g.s(10)
    add("python-implicit-concat", "keys.py", f'api_token = (\n    "{a}"\n    "{b}"\n)\n', a, b)
    v = g.word_pw()
    add("python-kwarg-spaces", "mail.py", f'smtp.login("ops", password="{v}")\n', v)
    a, b = g.s(10), g.s(10)
    add("js-concat", "client.js", f"const apiKey = '{a}' + '{b}';\n", a, b)
    v = g.s(20)
    add("js-template-literal", "cfg.ts", f"export const clientSecret = `{v}`;\n", v)
    v = g.word_pw()
    add("js-object", "db.js", f"module.exports = {{ user: 'app', password: '{v}' }};\n", v)
    v = g.s(16)
    add("go-const", "main.go", f'const apiToken = "{v}"\n', v)
    v = g.s(16)
    add("ruby-hash", "config.rb", f"config.secret_key_base = '{v}'\n", v)
    v = g.word_pw()
    add("java-setter", "Db.java", f'ds.setPassword("{v}");\n', v)
    v = g.s(20)
    add("csharp-const", "Keys.cs", f'private const string ApiKey = "{v}";\n', v)
    # --- Terraform / HCL ------------------------------------------------------------
    v = g.word_pw()
    add(
        "terraform-variable-default",
        "variables.tf",
        f'variable "db_password" {{\n  type    = string\n  default = "{v}"\n}}\n',
        v,
    )
    v = g.s(20)
    add(
        "terraform-attribute",
        "main.tf",
        f'resource "aws_db_instance" "x" {{\n  username = "app"\n  password = "{v}"\n}}\n',
        v,
    )
    k, s = akia + g.s(16, UP), g.s(40, B64)
    add(
        "terraform-provider",
        "provider.tf",
        f'provider "aws" {{\n  access_key = "{k}"\n  secret_key = "{s}"\n}}\n',
        k,
        s,
    )
    # --- CI YAML ----------------------------------------------------------------------
    v = g.s(26)
    add(
        "github-actions-env",
        ".github/workflows/ci.yml",
        f"jobs:\n  test:\n    env:\n      SONAR_TOKEN: {v}\n    steps:\n      - run: make\n",
        v,
    )
    v = g.s(20)
    add(
        "gitlab-ci-script",
        ".gitlab-ci.yml",
        f'deploy:\n  script:\n    - curl -H "PRIVATE-TOKEN: {v}" https://gl.local/api\n',
        v,
    )
    v = g.word_pw()
    add(
        "circleci-docker-auth",
        ".circleci/config.yml",
        f"    docker:\n      - image: corp/x\n        auth:\n          username: ci\n"
        f"          password: {v}\n",
        v,
    )
    # --- HTTP, XML, misc -----------------------------------------------------------
    v = g.s(32, URLS)
    add("http-x-auth-token", "req.http", f"GET /v1 HTTP/1.1\nX-Auth-Token: {v}\n", v)
    v = base64.b64encode(f"svc:{g.s(10)}".encode()).decode()
    add("http-basic", "req.http", f"GET / HTTP/1.1\nAuthorization: Basic {v}\n", v)
    v = g.word_pw()
    add("xml-attr", "web.config", f'<connection user="app" password="{v}" />\n', v)
    v = g.s(14)
    add("xml-element-spaces", "settings.xml", f"<server><password> {v} </password></server>\n", v)
    v = g.s(40, HEX)
    add("hex-secret-key", "django.env", f"DJANGO_SECRET_KEY={v}\n", v)
    v = g.s(10)
    add("short-pin-like", "device.yaml", f"device:\n  pairing_secret: {v}\n", v)
    ghv = ghp + g.s(36)
    add("github-token-in-md", "README.md", f"Use `{ghv}` to push.\n", ghv)
    v = g.s(44, B64)
    add("passphrase-yaml", "gpg.yml", f"gpg:\n  passphrase: '{v}'\n", v)
    v = g.s(24)
    add("credentials-key", "creds.ini", f"[remote]\ncredentials = {v}\n", v)
    v = g.word_pw()
    add("tab-separated", "users.tsv", f"user\tpassword\nops\t{v}\n", v)
    v = g.s(30, URLS)
    add("webhook-secret", ".env", f"WEBHOOK_SIGNING_SECRET={v}\n", v)
    v = g.s(18)
    add("ansible-vars", "group_vars/all.yml", f"ansible_become_password: {v}\n", v)
    v = g.s(16)
    add("yaml-inline-map", "x.yml", f"db: {{user: app, password: {v}}}\n", v)
    v = g.s(14)
    add("json-password-array", "users.json", json.dumps([{"login": "a", "pass": v}]), v)
    v = g.word_pw()
    add("sql-create-user", "init.sql", f"CREATE USER app WITH PASSWORD '{v}';\n", v)
    v = g.s(20)
    add("rails-credentials", "secrets.yml", f"production:\n  secret_key_base: {v}\n", v)

    # ======================= look-alikes (must stay byte for byte) ======================
    alike("env-reference-dollar", ".env", "DB_PASSWORD=${DB_PASSWORD}\n")
    alike("env-reference-python", "settings.py", 'PASSWORD = os.environ["DB_PASSWORD"]\n')
    alike("env-reference-getenv", "settings.py", 'token = os.getenv("API_TOKEN", "")\n')
    alike("env-reference-js", "cfg.js", "const apiKey = process.env.API_KEY;\n")
    alike("changeme", ".env.example", "ADMIN_PASSWORD=changeme\n")
    alike("your-token", "README.md", "Set `API_TOKEN=<your-token>` before running.\n")
    alike("aws-example-key-id", "docs.md", "aws_access_key_id = " + akia + "IOSFODNN7EXAMPLE\n")
    alike(
        "aws-example-secret",
        "docs.md",
        "aws_secret_access_key = wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n",
    )
    alike("github-actions-secret-ref", "ci.yml", "env:\n  NPM_TOKEN: ${{ secrets.NPM_TOKEN }}\n")
    alike("helm-template", "secret.tpl", "password: {{ .Values.db.password | quote }}\n")
    alike(
        "k8s-secret-ref",
        "deploy.yaml",
        "env:\n  - name: DB_PASSWORD\n    valueFrom:\n"
        "      secretKeyRef:\n        name: db\n        key: password\n",
    )
    alike("terraform-var-ref", "main.tf", "  password = var.db_password\n")
    alike(
        "terraform-sensitive-no-default",
        "vars.tf",
        'variable "api_token" {\n  type      = string\n  sensitive = true\n}\n',
    )
    alike("vault-ref", "app.yml", "password: vault:secret/data/db#password\n")
    alike("empty-password", "app.ini", "[db]\npassword =\n")
    alike("masked-password", "log.txt", "login ok, password=********\n")
    alike("git-sha", "CHANGES.md", f"Merged {g.s(40, HEX)} into main.\n")
    alike("sha256-sum", "SHA256SUMS", f"{g.s(64, HEX)}  app.tar.gz\n")
    alike("sha512-integrity", "package-lock.json", f'"integrity": "sha512-{g.s(86, B64)}=="\n')
    uid = "-".join(g.s(n, HEX) for n in (8, 4, 4, 4, 12))
    alike("uuid", "ids.json", json.dumps({"request_id": uid}) + "\n")
    alike("uuid-client-id", "app.yml", f"oauth:\n  client_id: {uid}\n")
    alike("uuid-tenant", "azure.json", json.dumps({"tenantId": uid}) + "\n")
    alike("docker-image-digest", "compose.yml", f"image: nginx@sha256:{g.s(64, HEX)}\n")
    alike("md5-etag", "resp.txt", f'ETag: "{g.s(32, HEX)}"\n')
    alike("test-fixture-password", "test_login.py", 'def test_bad():\n    assert not ok("x")\n')
    alike("password-field-label", "form.html", '<label for="password">Password</label>\n')
    alike("password-input", "form.html", '<input type="password" name="password" />\n')
    alike("token-counting", "llm.py", "max_tokens = 1024\nprompt_tokens = len(ids)\n")
    alike("token-type", "oauth.json", json.dumps({"token_type": "Bearer", "expires_in": 3600}))
    alike("secret-name-only", "vars.yml", "secret_name: db-credentials\n")
    alike("password-policy", "policy.yml", "password_min_length: 12\npassword_expiry: 90d\n")
    alike("password-hash-bcrypt-doc", "auth.md", "Passwords are hashed with bcrypt.\n")
    alike("key-file-path", "ssh.cfg", "IdentityFile ~/.ssh/id_ed25519\n")
    alike("private-key-path", "app.env", "PRIVATE_KEY_PATH=/run/secrets/key.pem\n")
    alike("url-no-credentials", "README.md", "See https://docs.example.org/auth/tokens#create\n")
    alike("url-user-only", "ssh.txt", "git clone ssh://git@github.com/acme/repo.git\n")
    alike("email-address", "AUTHORS", "Ada Lovelace <ada@example.org>\n")
    alike("public-key", "id.pub", f"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAI{g.s(43, B64)} ops@ci\n")
    alike(
        "certificate",
        "ca.crt",
        g.pem("CERTIFICATE", 6).replace("\n", "\n", 1) + "\n",
    )
    alike("base64-image", "logo.json", json.dumps({"png": base64.b64encode(bytes(60)).decode()}))
    alike("css-hex", "a.css", ".x{color:#1a2b3c;background:#abcdef}\n")
    alike("semver-lock", "poetry.lock", 'name = "keyring"\nversion = "24.3.0"\n')
    alike("password-placeholder-angle", "curl.md", "curl -u admin:<password> https://x.local\n")
    alike("password-placeholder-stars", "cfg.yml", "password: '***'\n")
    alike("token-placeholder-x", ".env.sample", "SLACK_TOKEN=xxxxxxxxxxxxxxxx\n")
    alike("todo-placeholder", "cfg.toml", 'api_key = "TODO"\n')
    alike("mkdir-p", "setup.sh", "mkdir -p /var/lib/app && cp -p a b\n")
    alike("ssh-port-flag", "ssh.sh", "ssh -p 2222 ops@host\n")
    alike("docker-port-flag", "run.sh", "docker run -p 8080:80 nginx\n")
    alike("secret-key-ref-settings", "conf.py", "SECRET_KEY = settings.SECRET_KEY\n")
    alike("password-compare", "auth.py", "if password != confirm_password:\n    raise Bad()\n")
    alike("getpass", "cli.py", 'password = getpass("Password: ")\n')
    alike("k8s-configmap", "cm.yaml", "apiVersion: v1\nkind: ConfigMap\ndata:\n  LOG_LEVEL: info\n")
    return sec, look


def _q(value: str) -> str:
    """Percent-encode a password for a URL's userinfo, as a URL must carry it."""
    from urllib.parse import quote

    return quote(value, safe="")
