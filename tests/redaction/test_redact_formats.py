"""Formats and argument grammars of #43: each family of places a secret sits, with what must stay.

Every secret is generated (seeded), never real. Each test names the family it attacks
and pairs the shapes that must be redacted with the look-alikes of the same family that
must come back unchanged (a prompt for the password, a variable, a placeholder). These
are the rules' own cases; ``test_redact_heldout.py`` measures them on shapes they were
not written for.
"""

from __future__ import annotations

import base64
import json
import random
import string
from urllib.parse import quote

import pytest

from ctxnb.redaction import redact

_R = random.Random(4301)
AL = string.ascii_letters + string.digits


def rnd(n: int, alphabet: str = AL) -> str:
    while True:
        v = "".join(_R.choice(alphabet) for _ in range(n))
        if any(c.isdigit() for c in v) and any(c.isalpha() for c in v):
            return v


def gone(text: str, *secrets: str) -> str:
    red = redact(text).text
    for s in secrets:
        assert s not in red, (text, red)
    assert "[REDACTED:" in red
    return red


def kept(text: str) -> None:
    assert redact(text).text == text


S = rnd(14)

# --- command lines ----------------------------------------------------------------------
CLI_SECRETS = [
    f"mysqldump -h db -uadmin -p{S} --single-transaction app",
    f"mariadb --password={S} -u root",
    f"docker exec -it db mysql -uroot -p'{S}' -e 'show databases'",
    f"ldapadd -x -D cn=admin,dc=example,dc=org -w {S} -f users.ldif",
    f'ldapmodify -H ldaps://dir -D "uid=svc" -w "{S}"',
    f"ldappasswd -D cn=admin -w {S} -s {S[::-1]} uid=ops",
    f"mongorestore --host db -u root -p {S} dump/",
    f"bcp dbo.t out t.dat -S sql -U sa -P {S} -c",
    f"keydb-cli -a {S} -h cache ping",
    f"rpcclient -U 'CORP\\admin%{S}' dc01",
    f"rabbitmqctl add_user deployer {S}",
    f"sshpass -p '{S}' scp a ops@host:/tmp",
    f"podman login -u ci -p {S} quay.io",
    f"curl -sS -U proxyuser:{S} -x proxy:3128 https://x.org",
    f"openssl rsa -in k.pem -passin pass:{S} -out k2.pem",
    f"keytool -importkeystore -srcstorepass {S} -deststorepass {S} -srckeystore a.jks",
    f"7z a -p{S} backup.7z data/",
    f"unzip -P {S} bundle.zip",
    f"ipmitool -I lanplus -H bmc -U admin -P {S} power status",
    f"plink -ssh ops@host -pw {S} uptime",
    f"xfreerdp /v:host /u:admin /p:{S}",
    f"sqlplus -s scott/{S}@//ora:1521/XE @report.sql",
    f"java -Djavax.net.ssl.trustStorePassword={S} -jar app.jar",
    f'$pw = ConvertTo-SecureString "{S}" -AsPlainText -Force',
    f"./manage --api-token {S} sync",
    f"influx -username admin -password {S} -execute 'show databases'",
]
CLI_KEPT = [
    "mysql -u root -p app < dump.sql",
    'mysqldump -uroot -p"$MYSQL_ROOT_PASSWORD" app',
    "ldapadd -x -D cn=admin -W -f users.ldif",
    "ldapmodify -x -D cn=admin -y /etc/ldap.secret -f a.ldif",
    "docker run -p 8080:80 -p 443:443 nginx",
    "podman run -p 5432:5432 postgres",
    "redis-cli -h cache -p 6379 ping",
    "bcp dbo.t out t.dat -S sql -U sa -P %BCP_PASSWORD% -c",
    "openssl rsa -in k.pem -passin env:KEY_PASS -out k2.pem",
    "openssl rsa -in k.pem -passin file:/run/secrets/pass -out k2.pem",
    "curl -U proxyuser -x proxy:3128 https://x.org",
    "sqlplus / as sysdba",
    "sqlplus -s @report.sql",
    "unzip -P $ZIP_PASSWORD bundle.zip",
    "ssh -p 2222 ops@host",
    "tar -czf a.tgz --exclude=.git src/",
    "./manage --api-token-file /run/secrets/token sync",
    "docker login --password-stdin -u ci registry.example.org",
    "git log -p --stat",
]


@pytest.mark.parametrize("line", CLI_SECRETS)
def test_client_password_arguments_are_redacted(line: str) -> None:
    gone(line, S)


@pytest.mark.parametrize("line", CLI_KEPT)
def test_client_command_lines_without_a_password_stay(line: str) -> None:
    kept(line)


# --- credential files -------------------------------------------------------------------
def test_client_credential_files() -> None:
    a, b, c, d = rnd(16), rnd(12), rnd(20), rnd(14)
    gone(f"localhost:*:*:postgres:{a}\n", a)
    gone(f"# comment\n*:5433:analytics:etl:{b}\n", b)
    esc = f"{b[:5]}\\:{b[5:]}"
    gone(f"db:5432:app:app:{esc}\n", esc)
    gone(f"[mysqldump]\nuser=backup\npassword='{c}'\n", c)
    gone(f"machine ftp.example.org\n  login anonymous\n  password {d}\n", d)
    gone(f"default login ops password {d}\n", d)
    npm = base64.b64encode(a.encode()).decode()
    gone(f"//npm.example.org/:_password={npm}\n//npm.example.org/:username=ci\n", npm)
    auth = base64.b64encode(f"ci:{c}".encode()).decode()
    gone(json.dumps({"auths": {"https://index.docker.io/v1/": {"auth": auth}}}, indent=2), auth)
    gone(f"[pypi]\nusername = __token__\npassword = pypi-{rnd(60)}\n", "pypi-")
    gone(f"[server]\nAuthPass={d}\nAuthUser=mailer\n", d)


def test_credential_file_look_alikes() -> None:
    kept("localhost:*:*:postgres:*\n")
    kept("12:30:45:100:200\n")
    # grep's path:line: before a JSON line, as a tool result shows it and JSON-escaped
    # inside a transcript's string: the line number looks like a port.
    hit = 'logs/s.jsonl:1:{"type":"snapshot","messageId":"22837041-38db-45b1","ok":false}'
    kept(hit + "\n")
    kept(json.dumps({"output": hit + "\n" + hit.replace(":1:", ":5:")}))
    kept("machine ftp.example.org login anonymous\n")
    kept(json.dumps({"auths": {"ghcr.io": {}}, "credHelpers": {"gcr.io": "gcloud"}}))
    kept("[client]\nuser=root\nsocket=/var/run/mysqld/mysqld.sock\n")


def _b64_without_digits(*, pair: bool) -> str:
    """base64 of a password (``pair``: of ``user:password``), drawn until it holds no digit:
    letters only, it reads as a camelCase name to every check that judges a value by its
    look."""
    r = random.Random(4302)
    while True:
        pw = "".join(r.choice(AL) for _ in range(12))
        raw = "".join(r.choice(AL) for _ in range(r.randint(3, 8))) + ":" + pw if pair else pw
        v = base64.b64encode(raw.encode()).decode()
        if not any(c.isdigit() for c in v):
            return v


def test_npmrc_credentials_are_read_as_npm_writes_them() -> None:
    pw, auth = _b64_without_digits(pair=False), _b64_without_digits(pair=True)
    gone(f"//registry.corp.lan/:username=ci\n//registry.corp.lan/:_password={pw}\n", pw)
    gone(f"_password={pw}\nemail=ci@corp.lan\n", pw)
    gone(f'//npm.corp.lan/repo/:_password="{pw}"\n', pw)
    gone(f"registry=https://npm.corp.lan/\n_auth={auth}\nalways-auth=true\n", auth)
    gone(f"//my_registry.corp.lan/:_auth = {auth}\n", auth)
    uuid = "-".join(rnd(n, "0123456789abcdef") for n in (8, 4, 4, 4, 12))
    gone(f"//registry.npmjs.org/:_authToken={uuid}\n", uuid)
    letters = rnd(36, string.ascii_lowercase + string.digits).lower()
    gone(f"//npm.pkg.github.com/:_authToken={letters}\n", letters)


def test_npmrc_look_alikes() -> None:
    # A reference npm expands, an empty value, a flag, a key named in prose.
    kept("//registry.npmjs.org/:_authToken=${NPM_TOKEN}\n")
    kept("_auth=\nalways-auth=true\n")
    kept("_password=${NPM_PASSWORD}\n")
    kept("Put the registry's `_authToken` in `.npmrc`, never `_password`.\n")
    # The same key in code, holding a name whose letters are valid base64 that decodes to
    # bytes, not text: not what npm writes under _password.
    kept("_password=newPasswordValue\n")


# --- SQL --------------------------------------------------------------------------------
def test_sql_that_sets_a_password() -> None:
    a, b = rnd(12), rnd(12)
    gone(f"CREATE USER reporting IDENTIFIED BY '{a}';", a)
    gone(f"create user 'etl'@'10.%' identified by '{a}';", a)
    gone(f"ALTER USER system IDENTIFIED BY {a} ACCOUNT UNLOCK;", a)
    gone(f"CREATE ROLE app WITH LOGIN ENCRYPTED PASSWORD '{a}';", a)
    gone(f"ALTER LOGIN sa WITH PASSWORD = '{a}' OLD_PASSWORD = '{b}';", a, b)
    gone(f"SET PASSWORD FOR 'app'@'%' = PASSWORD('{a}');", a)
    gone(f"SET PASSWORD = '{a}';", a)
    gone(f"CREATE USER svc PASSWORD = '{a}' DEFAULT_ROLE = reader;", a)
    gone(f"CREATE ROLE bot WITH PASSWORD = '{a}' AND LOGIN = true;", a)
    gone(f"ALTER USER app WITH PASSWORD '{a[:6]}''{a[6:]}';", a[:6], a[6:])
    gone(f"CREATE USER u PASSWORD '{a[:6]}' || '{b[:6]}';", a[:6], b[:6])


def test_sql_look_alikes() -> None:
    kept("SELECT id, password_hash, password_changed_at FROM users;")
    kept("CREATE USER 'app'@'%' IDENTIFIED WITH mysql_native_password;")
    kept("ALTER USER app IDENTIFIED BY :'new_password';")
    kept("ALTER USER app PASSWORD NULL;")
    kept("UPDATE users SET password = ? WHERE id = ?;")
    kept("ALTER ROLE app WITH PASSWORD $1;")


# --- JSON and notebook escapes ----------------------------------------------------------
def test_secrets_inside_json_strings_and_notebooks() -> None:
    a, b, c = rnd(20), rnd(16), rnd(18)
    nb = {
        "cells": [
            {
                "cell_type": "code",
                "source": [f'db = connect(password="{a}")\n', "db.ping()\n"],
                "outputs": [{"output_type": "stream", "text": [f"export API_TOKEN='{b}'\n"]}],
            }
        ],
        "nbformat": 4,
    }
    gone(json.dumps(nb, indent=1), a, b)
    line = json.dumps({"cmd": f'curl -H "X-Auth-Token: {c}" https://x.org'})
    gone(line, c)
    url = json.dumps({"dsn": f"postgres://app:{c}@db/app"}).replace("/", "\\/")
    gone(url, c)
    nested = json.dumps({"event": json.dumps({"msg": f'client_secret = "{a}"'})})
    gone(nested, a)
    gone(f"redirect_uri={quote(f'https://bot:{c}@id.example.org/cb', safe='')}&x=1", c)


def test_json_escape_look_alikes() -> None:
    kept(json.dumps({"cells": [{"source": ['token = os.environ["TOKEN"]\n']}]}))
    kept(json.dumps({"text": 'password = getpass("Password: ")\n'}))
    kept(json.dumps({"u": "https://example.org/a/b?x=1"}).replace("/", "\\/"))
    kept(f"next={quote('https://example.org/login?next=/home', safe='')}")


# --- kubeconfig -------------------------------------------------------------------------
def test_kubeconfig_credentials() -> None:
    tok, key, pw = rnd(48), rnd(200, AL + "+/"), rnd(14)
    cfg = (
        "apiVersion: v1\nkind: Config\nusers:\n- name: dev\n  user:\n"
        f"    client-certificate-data: {base64.b64encode(b'cert').decode()}\n"
        f"    client-key-data: {key}\n- name: bot\n  user:\n    token: {tok}\n"
        f"- name: basic\n  user:\n    username: admin\n    password: {pw}\n"
    )
    gone(cfg, tok, key, pw)


def test_kubeconfig_look_alikes() -> None:
    kept("users:\n- name: dev\n  user:\n    client-key: /home/dev/.kube/dev.key\n")
    kept("users:\n- name: gke\n  user:\n    exec:\n      command: gke-gcloud-auth-plugin\n")
    kept("users:\n- name: oidc\n  user:\n    auth-provider:\n      name: oidc\n")


# --- HTTP headers and cookies -----------------------------------------------------------
def test_cookies_and_auth_headers() -> None:
    a, b, c = rnd(32), rnd(40), rnd(24)
    gone(f"Cookie: _ga=GA1.2.3; connect.sid=s%3A{a}; lang=en", a)
    gone(f"set-cookie: _gitlab_session={b}; path=/; secure; HttpOnly", b)
    gone(f"curl -b 'remember_user_token={c}' https://x.org", c)
    gone(f'{{"headers": {{"cookie": "PHPSESSID={a}"}}}}', a)
    gone(f"Cookie: u={b}", b)  # unknown name, random value: a session id
    gone(f"< Proxy-Authorization: Basic {base64.b64encode(c.encode()).decode()}", c[:8])
    gone(f"X-Amz-Security-Token: {b}", b)


def test_cookie_look_alikes() -> None:
    kept("Cookie: theme=light; lang=de-DE; consent=accepted")
    kept("Set-Cookie: currency=EUR; Path=/; Expires=Wed, 21 Oct 2026 07:28:00 GMT")
    kept("document.cookie = 'visited=true; path=/';")
    kept("The cookie is set after login.")


# --- .properties ------------------------------------------------------------------------
def test_properties_continuations_and_separators() -> None:
    a, b, c = rnd(8), rnd(8), rnd(14)
    gone(f"spring.mail.password = \\\n        {a}\\\n        {b}\n", a, b)
    gone(f"ldap.bind.password={a}\\\n{b}\nldap.url=ldap://x\n", a, b)
    gone(f"jms.broker.password  {c}\n", c)
    gone(f"keystore.password:{c}\n", c)


def test_properties_look_alikes() -> None:
    kept("app.password.min-length 12\n")
    kept("mail.smtp.password ${SMTP_PASSWORD}\n")
    kept("# the admin password is rotated monthly\n")
    kept("greeting=Hello \\\n  world\n")


# --- assignments and concatenation in more languages -----------------------------------
def test_assignments_in_more_languages() -> None:
    a, b = rnd(10), rnd(10)
    gone(f'static API_SECRET: &str = "{a}";', a)
    gone(f'let secret: &\'static str = "{a}";', a)
    gone(f'Private Const DbPassword As String = "{a}"', a)
    gone(f'Dim apiKey = "{a}" & "{b}"', a, b)
    gone(f'local token = "{a}" .. "{b}"', a, b)
    gone(f'api_secret <- "{a}"', a)
    gone(f'my %cfg = (password => "{a}");', a)
    gone(f'val apiKey: String = "{a}" + "{b}"', a, b)
    gone(f'let clientSecret = "{a}"', a)
    gone(f'config :app, secret_key_base: "{a}{b}"', a + b)
    gone(f'password = f"{a}"', a)
    gone(f'$token = "{a}" + "{b}"', a, b)


def test_expressions_and_version_numbers_under_secret_names_stay() -> None:
    # Code read from a transcript's grep output and a package.json: an expression with a
    # logical or conditional operator, a version range under a "credential" package name.
    kept("        jwtToken: env.CODEMIE_JWT_TOKEN || undefined,\n")
    kept("        litellmApiKey: isLiteLLM ? env.CODEMIE_API_KEY : undefined,\n")
    kept("    api_key: settings.key ?? fallback\n")
    kept('{"dependencies": {"@aws-sdk/credential-providers": "^3.948.0"}}')
    kept("auth_version: 2.1\nsecret_format: >=1.4.2\n")
    # The same places holding a literal still go.
    gone(f"        jwtToken: {S},\n", S)
    gone(f"    api_key: {S[:6]}||{S[6:]}\n", S[6:])
    gone(f'{{"credential": "3.948.{S}"}}', S)


def test_key_names_modes_and_computed_strings_under_secret_names_stay() -> None:
    # A key's own name, a mode, a literal prefix with a method called on the next part
    # (all from a real transcript's grep output of a TypeScript project).
    kept("const result = sanitizeValue('REDACTED_API_KEY', 'API_KEY');\n")
    kept("const result = sanitizeValue('REDACTED_API_KEY', 'api-key');\n")
    kept("        env.OPENAI_API_KEY = 'proxy-handled';\n")
    kept("env: { CODEMIE_API_KEY: 'test-key' }\n")
    kept("      const apiKey = 'sk-ant-' + 'a'.repeat(100);\n")
    kept('{"scripts": {"validate:secrets": "node scripts/validate-secrets.js"}}')
    # The same shapes drawn at random are not names: they go.
    kebab, upper = "xkqzw-prtvmmqz", "QZXWV_PLMKT"
    gone(f"        env.OPENAI_API_KEY = '{kebab}';\n", kebab)
    gone(f"API_TOKEN = '{upper}'\n", upper)
    gone(f"      const apiKey = '{S}' + '{S[::-1]}';\n", S)


def test_language_look_alikes() -> None:
    kept("let token = try await provider.fetchToken()")
    kept("local password = os.getenv('DB_PASSWORD')")
    kept("api_secret <- Sys.getenv('API_SECRET')")
    kept("Dim password As String = txtPassword.Text")
    kept("ch <- token")
    # A language keyword is the start of an expression, never the secret.
    kept("const authToken = await fetchSessionToken(userId);")
    kept("password = new PasswordField(form)")


# --- vendor tokens glued by "_" ---------------------------------------------------------
def test_a_token_after_an_underscore_is_redacted() -> None:
    gh = "gh" + "p_" + rnd(36)
    st = "sk" + "_live_" + rnd(24)
    gone(f"key_{gh}", gh)
    gone(f"MY_SECRET_{st}", st)
    gone(f"value: prefix_{'AK' + 'IA'}{rnd(16, string.ascii_uppercase + string.digits)}", "AKIA")


def test_a_token_prefix_inside_a_word_is_not_a_token() -> None:
    kept("desk_live_" + "a" * 3 + rnd(20))
    kept("thisghp_is_not_a_token_at_all")
