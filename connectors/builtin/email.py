"""Built-in Email connector: ``email.send`` over SMTP (aiosmtplib).

The SMTP server comes from an ``smtp`` credential (host, port, ``security``: ``starttls``
(port 587), ``tls`` = implicit TLS (port 465) or ``none``; username/password; default
sender; ``verify_tls``). The host must pass the SSRF policy like any outbound request.

Subject, text and HTML bodies are Jinja2 templates rendered in a ``SandboxedEnvironment``
(the HTML one autoescaped) with the variables ``input`` (the step input) and ``data`` (the
``data`` config value, e.g. an expression picking earlier outputs). An undefined
variable is an error (``StrictUndefined``), so a typo fails the step instead of sending
a blank.

Attachments (``attachments``): a list of ``{"filename", "content_base64",
"content_type"?}`` or ``{"filename", "file": <file ref>}`` where a file ref is what
``http.request`` returns with ``response_format: bytes`` (``{"base64", "size",
"content_type"}``). ``max_attachment_bytes`` caps their total decoded size.

``Message-ID`` is derived from the step's idempotency key, so a retried send carries the
same id and receivers that deduplicate see one message.

Output: ``{"message_id", "accepted": [...], "refused": {address: "code message"}}``.
Errors: authentication failure (kind ``smtp_auth``), every recipient refused
(``smtp_recipients_refused``), template errors (``template_error``) and other 5xx replies
are not retryable; connection failures, timeouts and 4xx replies are.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import ssl
from email.message import EmailMessage
from email.utils import formatdate
from typing import Annotated, Any, TypedDict

import aiosmtplib
import jinja2
import msgspec

from connectors import sdk
from connectors.builtin import templating

__all__ = ["SMTP", "EmailSendConfig", "connector", "render_template", "send_email"]

SMTP = sdk.credential_type(
    "smtp",
    label="SMTP server",
    kind="smtp",
    fields=sdk.SmtpFields,
    description="Mail server login used to send email",
)


class Attachment(msgspec.Struct, kw_only=True):
    """One attachment: base64 content or a file ref (``{"base64", "content_type"}``)."""

    filename: str
    content_base64: str | None = None
    file: dict[str, Any] | None = None
    content_type: str = ""


EmailAddress = Annotated[str, msgspec.Meta(extra_json_schema={"format": "email"})]
"""A recipient address (the designer shows list fields of these as address chips)."""


class EmailSendConfig(msgspec.Struct, kw_only=True):
    """Config of ``email.send``."""

    credential: Annotated[str, sdk.credential_meta("smtp", title="SMTP server")]
    to: Annotated[list[EmailAddress], msgspec.Meta(title="To", min_length=1)]
    subject: Annotated[str, msgspec.Meta(title="Subject", description="Jinja2 template")]
    text: Annotated[
        str,
        msgspec.Meta(
            title="Text body",
            description="Jinja2 template",
            extra_json_schema={"x-multiline": True},
        ),
    ] = ""
    html: Annotated[
        str,
        msgspec.Meta(
            title="HTML body",
            description="Jinja2 template, autoescaped",
            extra_json_schema={"x-multiline": True},
        ),
    ] = ""
    from_address: Annotated[
        str, msgspec.Meta(title="From", description="Defaults to the credential's sender")
    ] = ""
    cc: Annotated[list[EmailAddress], msgspec.Meta(title="Cc")] = []
    bcc: Annotated[list[EmailAddress], msgspec.Meta(title="Bcc")] = []
    reply_to: Annotated[str, msgspec.Meta(title="Reply-To")] = ""
    data: Annotated[
        Any, msgspec.Meta(title="Template data", description="Available as `data` in templates")
    ] = None
    attachments: Annotated[list[Attachment], msgspec.Meta(title="Attachments")] = []
    max_attachment_bytes: Annotated[int, msgspec.Meta(title="Attachment size cap", ge=0)] = (
        10 * 1024 * 1024
    )
    send_timeout: Annotated[float, msgspec.Meta(title="Timeout (s)", gt=0)] = 30.0


def render_template(source: str, variables: dict[str, Any], *, html: bool) -> str:
    """Render ``source`` in the sandbox (autoescaped when ``html``).

    Raises ``sdk.NonRetryableError`` (kind ``template_error``) naming the problem.
    """
    try:
        return templating.render(source, variables, html=html)
    except jinja2.TemplateError as err:
        raise sdk.NonRetryableError(
            f"template error: {type(err).__name__}: {err}", kind="template_error"
        ) from None


def _attachment_bytes(att: Attachment) -> tuple[bytes, str]:
    source = att.content_base64
    content_type = att.content_type
    if source is None and att.file is not None:
        source = att.file.get("base64")
        content_type = content_type or str(att.file.get("content_type") or "")
    if not isinstance(source, str):
        raise sdk.ConfigError(f"attachment {att.filename!r} has no content_base64 or file")
    try:
        content = base64.b64decode(source, validate=True)
    except (binascii.Error, ValueError):
        raise sdk.ConfigError(f"attachment {att.filename!r}: invalid base64") from None
    return content, (content_type.split(";")[0].strip() or "application/octet-stream")


def _message_id(key: str, sender: str) -> str:
    domain = sender.rsplit("@", 1)[-1].strip(">").strip() or "railyard.local"
    return f"<{hashlib.sha256(key.encode()).hexdigest()[:32]}@{domain}>"


def build_message(config: EmailSendConfig, sender: str, input: Any) -> EmailMessage:
    """The MIME message (text and/or HTML alternative, attachments)."""
    variables = {"input": input, "data": config.data}
    msg = EmailMessage()
    msg["From"] = sender
    msg["To"] = ", ".join(config.to)
    if config.cc:
        msg["Cc"] = ", ".join(config.cc)
    if config.reply_to:
        msg["Reply-To"] = config.reply_to
    msg["Subject"] = render_template(config.subject, variables, html=False).replace("\n", " ")
    msg["Date"] = formatdate(localtime=False)
    msg["Message-ID"] = _message_id(sdk.info().idempotency_key, sender)
    text = render_template(config.text, variables, html=False) if config.text else ""
    html = render_template(config.html, variables, html=True) if config.html else ""
    if not text and not html:
        raise sdk.ConfigError("an email needs a text or an HTML body")
    msg.set_content(text or "This message has an HTML body.")
    if html:
        msg.add_alternative(html, subtype="html")
    total = 0
    for att in config.attachments:
        content, content_type = _attachment_bytes(att)
        total += len(content)
        if total > config.max_attachment_bytes:
            raise sdk.NonRetryableError(
                f"attachments exceed {config.max_attachment_bytes} bytes",
                kind="attachment_too_large",
            )
        maintype, _, subtype = content_type.partition("/")
        msg.add_attachment(
            content, maintype=maintype, subtype=subtype or "octet-stream", filename=att.filename
        )
    return msg


class SendEmailOutput(TypedDict):
    """The sent message's `message_id` (the Message-ID header, e.g. `<...@host>`), the
    `accepted` recipients (To, Cc and Bcc) and the `refused` ones (address -> SMTP code
    and reply text); the step fails when every recipient is refused."""

    message_id: str
    accepted: list[str]
    refused: dict[str, str]


@sdk.action(
    "email.send",
    label="Send email",
    config=EmailSendConfig,
    category="Email",
    icon="mail",
    description="Send an email through an SMTP server (templates, HTML, attachments).",
    expression_fields=("to", "cc", "bcc", "subject", "text", "html", "data", "attachments"),
)
async def send_email(config: EmailSendConfig, input: Any) -> SendEmailOutput:
    """Render the templates, connect (STARTTLS / TLS / plain), log in, send."""
    smtp = sdk.credential("credential")
    sender = config.from_address or smtp.get("from_address") or smtp.get("username") or ""
    if not sender:
        raise sdk.ConfigError("no sender: set From or the credential's default sender")
    message = build_message(config, sender, input)
    host, port, security = smtp["host"], int(smtp["port"]), smtp.get("security", "starttls")
    await sdk.current_context().ssrf.resolve_and_check(host, port)
    context = ssl.create_default_context()
    if not smtp.get("verify_tls", True):
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    client = aiosmtplib.SMTP(
        hostname=host,
        port=port,
        use_tls=security == "tls",
        start_tls=True if security == "starttls" else False,
        tls_context=context,
        timeout=config.send_timeout,
    )
    recipients = [*config.to, *config.cc, *config.bcc]
    try:
        async with client:
            if smtp.get("username"):
                await client.login(smtp["username"], smtp.get("password", ""))
            refused, _reply = await client.send_message(
                message, sender=sender, recipients=recipients
            )
    except aiosmtplib.SMTPAuthenticationError as err:
        raise sdk.NonRetryableError(
            f"SMTP login to {host} failed: {err.code} {err.message}", kind="smtp_auth"
        ) from None
    except aiosmtplib.SMTPRecipientsRefused as err:
        raise sdk.NonRetryableError(
            "every recipient was refused: "
            + "; ".join(f"{r.recipient}: {r.code} {r.message}" for r in err.recipients),
            kind="smtp_recipients_refused",
        ) from None
    except aiosmtplib.SMTPResponseException as err:
        retryable = 400 <= err.code < 500
        raise sdk.ActionError(
            f"SMTP server {host} answered {err.code} {err.message}",
            kind=f"smtp_{err.code}",
            retryable=retryable,
        ) from None
    except (aiosmtplib.SMTPException, OSError) as err:
        raise sdk.ActionError(
            f"cannot send through {host}:{port}: {type(err).__name__}: {err}", kind="smtp_connect"
        ) from None
    return {
        "message_id": str(message["Message-ID"]),
        "accepted": [r for r in recipients if r not in refused],
        "refused": {addr: f"{code} {text}" for addr, (code, text) in refused.items()},
    }


connector = sdk.Connector(
    name="email",
    label="Email",
    version="1.0.0",
    description="Send email over SMTP",
    actions=[send_email],
    credential_types=[SMTP],
    icon="mail",
)
