"""The token rules of the redactor, as data: each one named after the maintained scanner rule it follows.

Sources (kept as data, not as a dependency: aoti-bisect installs beside arbitrary torch environments):
- detect-secrets 1.5.0 (Yelp, Apache License 2.0), detect_secrets/plugins/*.py `denylist` regexes: the rule
  names below marked `ds:`; their regexes are copied; a word boundary is checked after a literal prefix, not
  before it (a leading \\b or class, tried at every position of a 32 MiB log, is up to 20x slower).
- gitleaks (Zachary Rice, MIT License), config/gitleaks.toml: the rules marked `gl:`.
- High-entropy assignments: detect-secrets' Base64HighEntropyString (Shannon entropy >= 4.5 bits per character
  over the base64 alphabet) applied, as its KeywordDetector does, to the value of an assignment; see
  redact.py `_high_entropy_assignment`.

A rule that detect-secrets finds only by verifying it against a live service (IBM, SoftLayer, Cloudant) is
left to the assignment rules, which catch the same values by their names (`ibm_api_key = ...`).
"""
from __future__ import annotations

import re

TOKEN_RULES: tuple[tuple[str, str], ...] = (
    # (rule name, regex)
    ("gl:github-pat ds:GitHubTokenDetector", r"gh[pousr]_[A-Za-z0-9_]{30,}"),
    ("gl:github-fine-grained-pat", r"github_pat_[A-Za-z0-9_]{20,}"),
    ("gl:gitlab-* ds:GitLabTokenDetector",
     r"gl(?:pat|ptt|rt|dt|oas|cbt|imt|agent|soat|ffct|ft|runner|sa)-[A-Za-z0-9_-]{20,}"),
    ("ds:GitLabTokenDetector (runner registration)", r"GR1348941[A-Za-z0-9_-]{20,50}"),
    ("gl:aws-access-token ds:AWSKeyDetector", r"(?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"),
    ("ds:AzureStorageKeyDetector", r"AccountKey=[a-zA-Z0-9+/=]{88}"),
    ("ds:SlackDetector gl:slack-*-token", r"xox[abposre]-[A-Za-z0-9-]{10,}"),
    ("ds:SlackDetector gl:slack-webhook-url", r"https://hooks\.slack\.com/(?:services|workflows)/[A-Za-z0-9_/+-]+"),
    ("gl:discord-webhook", r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_-]+"),
    ("gl:msteams-webhook", r"https://[a-z0-9]+\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/_-]+"),
    ("gl:huggingface-access-token", r"hf_[A-Za-z0-9]{30,}"),
    ("gl:huggingface-organization-api-token", r"api_org_[A-Za-z0-9]{30,}"),
    ("gl:openai-api-key gl:anthropic-api-key ds:OpenAIDetector",
     r"sk-(?<![\w-]sk-)(?:ant-(?:api|admin)\d\d-|proj-|svcacct-|admin-|ant-)?[A-Za-z0-9_-]{20,}"),
    ("gl:gcp-api-key", r"AIza[0-9A-Za-z_-]{35}"),
    # An unsigned JWT (`alg: none`) ends at its second dot, with no signature: detect-secrets flags it too.
    ("gl:jwt ds:JwtTokenDetector", r"eyJ(?<![A-Za-z0-9_-]eyJ)[A-Za-z0-9_-]{8,}={0,2}\.eyJ[A-Za-z0-9_-]{8,}={0,2}"
                                   r"(?:\.[A-Za-z0-9_-]*={0,2})?"),
    ("gl:stripe-access-token ds:StripeDetector", r"[srp]k_(?:test|live|prod)_[A-Za-z0-9]{10,99}"),
    ("gl:npm-access-token", r"npm_[A-Za-z0-9]{36}"),
    ("ds:NpmDetector", r"//[^\s/]+/:_authToken=\s*\S+"),
    ("gl:pypi-upload-token ds:PypiTokenDetector", r"pypi-AgE(?:IcHlwaS5vcmc|NdGVzdC5weXBpLm9yZw)[A-Za-z0-9_-]{50,}"),
    ("ds:SendGridDetector", r"SG\.[a-zA-Z0-9_-]{22}\.[a-zA-Z0-9_-]{43}"),
    ("ds:SquareOAuthDetector", r"sq0csp-[0-9A-Za-z\\_-]{43}"),
    ("ds:TwilioKeyDetector", r"(?:AC|SK)(?<![A-Za-z0-9]AC)(?<![A-Za-z0-9]SK)[a-z0-9]{32}\b"),
    ("ds:MailchimpDetector", r"\b[0-9a-f]{32}-us[0-9]{1,2}\b"),
    ("ds:ArtifactoryDetector", r"AKC(?<![A-Za-z0-9]AKC)[a-zA-Z0-9]{10,}"),
    ("ds:TelegramBotTokenDetector", r"\b[0-9]{8,10}:AA[0-9A-Za-z_-]{33}\b"),
    ("ds:DiscordBotTokenDetector", r"\b[MNO][a-zA-Z0-9_-]{23,25}\.[a-zA-Z0-9_-]{6}\.[a-zA-Z0-9_-]{27,38}"),
    ("gl:databricks-api-token", r"dapi(?<![A-Za-z0-9]dapi)[a-f0-9]{32}(?:-\d)?\b"),
    ("gl:digitalocean-*", r"do[opr]_v1_[a-f0-9]{64}"),
    ("gl:shopify-*", r"shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32}"),
    ("gl:doppler-api-token", r"dp\.pt\.[a-z0-9]{43}"),
    ("gl:grafana-*", r"glsa_[A-Za-z0-9]{32}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,400}={0,2}"),
    ("gl:wandb (keyword)", r"(?i)wandb_api_key\s*[=:]\s*[a-f0-9]{40}"),
    ("gl:vault-service-token", r"hvs\.[A-Za-z0-9_-]{90,120}"),
    ("gl:vault-batch-token", r"hvb\.[A-Za-z0-9_-]{138,300}"),
    ("gl:age-secret-key", r"AGE-SECRET-KEY-1[QPZRY9X8GF2TVDW0S3JN54KHCE6MUA7L]{58}"),
    ("gl:slack-app-token", r"xapp-\d-[A-Za-z0-9]{6,}-\d{6,}-[A-Za-z0-9]{10,}"),
    ("gl:stripe-webhook-secret", r"whsec_[A-Za-z0-9]{24,}"),
    ("gl:gcp-oauth-client-secret", r"GOCSPX-[A-Za-z0-9_-]{28}"),
    ("gl:gcp-oauth-access-token", r"ya29\.[A-Za-z0-9_-]{20,}"),
    # From its `Q~` on (led by a literal, a rule costs a fraction of a pass over a log): its first 4 of 40 stay.
    ("gl:azure-ad-client-secret", r"Q~(?<=[A-Za-z0-9_~.]{3}\dQ~)[A-Za-z0-9_~.-]{31,34}"),
    # A shared access signature's `sig=` (Azure) and a presigned URL's signature and session token (S3): each a
    # credential by itself, however short the URL's life.
    ("gl:azure-sas-signature", r"sig=(?<=[?&]sig=)[A-Za-z0-9%+/=]{16,}"),
    ("gl:aws-presigned-signature", r"X-Amz-(?:Signature|Security-Token)=[A-Za-z0-9%+/=_-]{16,}"),
    ("gl:aws-session-token", r"(?:FwoGZXIvYXdz|IQoJb3JpZ2lu)(?<![A-Za-z0-9/+=]FwoGZXIvYXdz)"
                             r"(?<![A-Za-z0-9/+=]IQoJb3JpZ2lu)[A-Za-z0-9/+=]{100,}"),
    ("gl:groq-api-key", r"gsk_[A-Za-z0-9]{48,}"),
    ("gl:replicate-api-token", r"r8_(?<![A-Za-z0-9]r8_)[A-Za-z0-9]{37}"),
    ("gl:bitbucket-app-password", r"ATBB[A-Za-z0-9]{32}"),
    ("gl:atlassian-api-token", r"ATATT3(?<![A-Za-z0-9_=.-]ATATT3)[A-Za-z0-9_=.-]{60,}"),
    ("gl:bitbucket-repository-access-token", r"ATCTT3(?<![A-Za-z0-9_=.-]ATCTT3)[A-Za-z0-9_=.-]{60,}"),
    ("gl:buildkite-user-access-token", r"bkua_[a-f0-9]{40}"),
    ("gl:figma-pat", r"figd_(?<![A-Za-z0-9_-]figd_)[A-Za-z0-9_-]{40,}"),
    ("gl:alibaba-access-key-id", r"LTAI(?<![A-Za-z0-9]LTAI)[A-Za-z0-9]{20}\b"),
    ("gl:tencent-secret-id", r"AKID(?<![A-Za-z0-9]AKID)[A-Za-z0-9]{32}\b"),
)

# ds:PrivateKeyDetector's headers, as whole PEM blocks (and PuTTY files); a fragment cut off by an excerpt or
# a log's splice is redact.py's `_pem_fragments`.
# PEM's five dashes, and RFC 4716's four and a space (`---- BEGIN SSH2 ENCRYPTED PRIVATE KEY ----`).
PEM_BEGIN = r"----(?:-BEGIN[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----| BEGIN SSH2 [A-Z ]{0,40}PRIVATE KEY ----)"
PEM_END = r"----(?:-END[A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----| END SSH2 [A-Z ]{0,40}PRIVATE KEY ----)"
# A key file's whole block (an RSA-8192 PEM is 6.3 KB), never past the next block's start: BEGIN lines without an
# END must not each scan the rest of a log (quadratic). A longer block is still masked by redact.py's _pem_fragments.
MAX_KEY_BLOCK = 16384
PRIVATE_KEY_RULES: tuple[tuple[str, str], ...] = (
    ("ds:PrivateKeyDetector gl:private-key",
     PEM_BEGIN + rf"(?:(?!-{{4,5}} ?BEGIN)[\s\S]){{0,{MAX_KEY_BLOCK}}}?" + PEM_END),
    ("ds:PrivateKeyDetector (PuTTY)",
     rf"PuTTY-User-Key-File-[23]:(?:(?!PuTTY-User-Key-File-)[\s\S]){{0,{MAX_KEY_BLOCK}}}?"
     r"Private-MAC: {0,8}[0-9a-f]+"),
)

COMPILED = tuple(re.compile(rx) for _, rx in PRIVATE_KEY_RULES + TOKEN_RULES)
NAMES = tuple(name for name, _ in PRIVATE_KEY_RULES + TOKEN_RULES)


def _needles(rx: str) -> tuple[str, ...]:
    """Literal strings one of which every match of rx contains: its leading literal (each alternative's, for a
    leading group of literals). A text holding none of them is not searched with rx: a `str in` test is ~50x
    faster than a regex pass over a 32 MiB log. Empty: no needle known, always search."""
    body = rx.removeprefix(r"\b")
    depth = 0
    for i, c in enumerate(body):  # a top-level alternation (`a...|b...`): no one leading literal
        if c == "\\":
            continue
        depth += (c == "(" and body[i - 1:i] != "\\") - (c == ")" and body[i - 1:i] != "\\")
        if c == "|" and depth == 0 and body[i - 1:i] != "\\":
            return ()
    if body.startswith("(?:") and (close := body.find(")")) != -1 and "(" not in body[3:close]:
        alts, rest = body[3:close].split("|"), body[close + 1:]
        head = re.match(r"[A-Za-z0-9_:=/-]+", rest)
        if all(re.fullmatch(r"[A-Za-z0-9_-]+", a) for a in alts):
            return tuple(a + (head.group(0) if head else "") for a in alts)
        return ()
    head = re.match(r"(?:[A-Za-z0-9_:=/-]|\\\.)+", body)
    literal = head.group(0).replace("\\.", ".") if head else ""
    return (literal,) if len(literal) >= 2 else ()


NEEDLES = tuple(_needles(rx) for _, rx in PRIVATE_KEY_RULES + TOKEN_RULES)

# detect-secrets' Base64HighEntropyString limit (its default, 4.5 bits a character), and the shortest value it
# is applied to here: a 20-character string over 64 symbols reaches 4.3 bits at most, so shorter ones never pass.
ENTROPY_LIMIT = 4.5
ENTROPY_MIN_LENGTH = 24
