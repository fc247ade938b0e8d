"""E-mail over SMTP (stdlib smtplib): the seed's fallback when every chat tool is down.

One connection per attempt, with a timeout on connect and on every command. Refused
recipients, a refused login or a 5xx answer are `PageRefused`; a timeout, a refused or
dropped connection or a 4xx (greylisting, "try again later") are `PageUnavailable`.
The password goes only to `SMTP.login`; smtplib logs nothing unless debuglevel is set.
"""

from __future__ import annotations

import smtplib
import time
from email.message import EmailMessage
from email.utils import make_msgid

from pydantic import SecretStr

from bot.errors import PageError, PageRefused, PageUnavailable
from bot.escalation.http import secrets_filter
from bot.escalation.paging import Delivery, Page, Retry, Sleep, deliver


class EmailTarget:
    kind = "email"

    def __init__(
        self,
        name: str,
        *,
        host: str,
        sender: str,
        recipients: list[str],
        port: int = 25,
        starttls: bool = False,
        username: str | None = None,
        password: SecretStr | None = None,
        timeout: float = 10.0,
        retry: Retry | None = None,
        sleep: Sleep = time.sleep,
    ) -> None:
        self.name = name
        self.host, self.port = host, port
        self.sender, self.recipients = sender, list(recipients)
        self.starttls = starttls
        self.username, self._password = username, password
        self.timeout = timeout
        self.retry = retry or Retry()
        self._sleep = sleep
        secrets_filter.add(password.get_secret_value() if password else None)

    def where(self) -> str:
        return f"email target {self.name!r} (smtp {self.host}:{self.port})"

    def message(self, page: Page) -> EmailMessage:
        message = EmailMessage()
        message["From"] = self.sender
        message["To"] = ", ".join(self.recipients)
        message["Subject"] = page.subject
        message["Message-ID"] = make_msgid(domain="runbook-bot")
        # Threads every mail about one incident together in a mail client.
        message["References"] = f"<{page.dedup_key}@runbook-bot>"
        message.set_content(page.text())
        return message

    def send(self, page: Page) -> Delivery:
        return deliver(self.name, page, self.attempt, retry=self.retry, sleep=self._sleep)

    def attempt(self, page: Page) -> str:
        try:
            with smtplib.SMTP(self.host, self.port, timeout=self.timeout) as smtp:
                if self.starttls:
                    smtp.starttls()
                if self.username is not None and self._password is not None:
                    smtp.login(self.username, self._password.get_secret_value())
                refused = smtp.send_message(self.message(page))
        except PageError:
            raise
        except smtplib.SMTPRecipientsRefused as exc:
            raise PageRefused(
                f"{self.where()} refused every recipient ({_recipients(exc.recipients)}); "
                "check the recipients setting"
            ) from None
        except smtplib.SMTPAuthenticationError as exc:
            raise PageRefused(
                f"{self.where()} refused the login of {self.username!r} ({exc.smtp_code}); "
                "check username and password_file/password_env"
            ) from None
        except smtplib.SMTPNotSupportedError:
            raise PageRefused(
                f"{self.where()} does not offer STARTTLS or AUTH; check starttls and port"
            ) from None
        except smtplib.SMTPResponseException as exc:
            text = _decode(exc.smtp_error)
            if 400 <= exc.smtp_code < 500:
                raise PageUnavailable(
                    f"{self.where()} answered {exc.smtp_code} {text}; will retry"
                ) from None
            raise PageRefused(
                f"{self.where()} refused the mail ({exc.smtp_code} {text}); check sender and "
                "relay settings"
            ) from None
        except (OSError, smtplib.SMTPException) as exc:
            raise self._unreachable(exc) from None
        if refused:
            raise PageRefused(
                f"{self.where()} delivered to some recipients but refused "
                f"{_recipients(refused)}; check the recipients setting"
            )
        return f"mail accepted for {', '.join(self.recipients)}"

    def _unreachable(self, exc: BaseException) -> PageUnavailable:
        # smtplib turns a read timeout into SMTPServerDisconnected("...: timed out").
        cause: BaseException | None = exc
        while cause is not None and not isinstance(cause, TimeoutError):
            cause = cause.__context__
        if cause is not None:
            return PageUnavailable(
                f"{self.where()} did not answer within {self.timeout:g} s; check host, port "
                "and the network path from the bot"
            )
        reason = secrets_filter.scrub(str(exc) or type(exc).__name__)
        return PageUnavailable(f"cannot talk to {self.where()}: {reason}; check host and port")


def _decode(value: bytes | str) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


def _recipients(refused: dict[str, tuple[int, bytes]]) -> str:
    return ", ".join(f"{who}: {code} {_decode(why)}" for who, (code, why) in refused.items())
