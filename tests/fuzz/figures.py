"""Run the security checks and the fuzz suite, then write their rows of docs/reliability.md.

    .venv/bin/python -m tests.fuzz.figures docs/reliability.md

Runs pytest on every test the rows name (the ones in tests/security and tests/fuzz and the
existing ones elsewhere that prove a security claim), reads the outcome of each from a
JUnit report and the fuzz tallies from RUNBOOK_BOT_TEST_FUZZ_FIGURES (tests/fuzz/conftest.py),
and replaces what lies between `<!-- security:start -->`/`<!-- security:end -->` and
`<!-- fuzz:start -->`/`<!-- fuzz:end -->`; the rest of the file (the chaos suite's rows)
is left as it is. Nothing here is typed in by hand but the claims themselves.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Row:
    fault: str
    expected: str
    tests: tuple[str, ...]
    """`path::function`, each parametrization counted."""


SECURITY = [
    Row(
        "Slack request signed with the wrong secret (forged)",
        "401; the step stays awaiting approval",
        ("tests/chat/test_slack.py::test_forged_and_stale_requests_are_rejected",),
    ),
    Row(
        "Slack request with a timestamp 301 s old (stale)",
        "401; the step stays awaiting approval",
        ("tests/chat/test_slack.py::test_forged_and_stale_requests_are_rejected",),
    ),
    Row(
        "the same signed Slack request sent twice (replayed)",
        "the replay is refused with 401; the step is approved once",
        ("tests/chat/test_slack.py::test_double_clicks_and_retried_requests_act_once",),
    ),
    Row(
        "webhook without credentials, with a wrong bearer token, with basic auth or a bare "
        "token when a bearer token is configured",
        "401 with `WWW-Authenticate: Bearer`; nothing stored",
        (
            "tests/test_webhook_contract.py::"
            "test_bearer_auth_refuses_missing_or_wrong_credentials_with_401",
            "tests/test_webhook_contract.py::test_basic_auth_accepts_the_right_pair_only",
        ),
    ),
    Row(
        "console page or POST without a login; forged or edited session cookie",
        "pages redirect to the login; POSTs answer 401; a forged cookie is no session",
        (
            "tests/console/test_login.py::"
            "test_every_console_page_redirects_to_the_login_without_a_session",
            "tests/console/test_decisions.py::test_a_post_without_a_login_answers_401",
            "tests/console/test_login.py::test_a_forged_or_edited_cookie_is_no_session",
        ),
    ),
    Row(
        "console POST (decision, login, logout) without the session's CSRF token",
        "refused; nothing decided",
        (
            "tests/console/test_decisions.py::"
            "test_every_post_is_refused_without_the_sessions_csrf_token",
            "tests/console/test_login.py::test_a_login_form_without_its_csrf_token_is_refused",
            "tests/console/test_login.py::test_logout_ends_the_session_and_needs_the_csrf_token",
        ),
    ),
    Row(
        "one responder approving a disruptive step alone (twice, padded or re-cased name, "
        "no role) in the engine, Slack, the console and the HTTP API",
        "the second approval by the same person is refused (409 on the API); the step "
        "waits for a second, different person",
        (
            "tests/runbooks/test_approvals.py::test_a_disruptive_step_needs_two_different_people",
            "tests/chat/test_slack.py::test_a_disruptive_step_needs_two_different_people",
            "tests/console/test_decisions.py::test_a_disruptive_step_needs_two_different_people",
            "tests/security/test_api_approvals.py::"
            "test_the_webhook_token_decides_nothing_and_a_token_decides_only_as_its_owner",
        ),
    ),
    Row(
        "the Alertmanager webhook token on the decision endpoints: a disruptive step "
        'approved `{"as": "alice"}` then `{"as": "bob"}`; no token; a revoked, forged or '
        "5 KiB token; alice's own token naming bob",
        "401 for the webhook token and every invalid token (the body unread), 400 for a body "
        "with `as`; alice's token counts once and the step still waits; the CLI's `--as` "
        "must name a known person (exit 2) (issue 19, item 1)",
        (
            "tests/security/test_api_approvals.py::"
            "test_the_webhook_token_decides_nothing_and_a_token_decides_only_as_its_owner",
            "tests/runbooks/test_step_commands.py::"
            "test_the_decision_endpoints_answer_401_without_a_token_even_with_no_webhook_token",
            "tests/runbooks/test_step_commands.py::test_the_clis_as_must_name_a_known_person",
        ),
    ),
    Row(
        "alice approves a disruptive step as console user `alice`, then in Slack as "
        "`slack:UALICE` (the Slack id of the same person)",
        'the Slack approval is refused ("one person counts once whichever channel they '
        'use"); the step waits until bob approves; the log records each person with its '
        "channel (issue 19, item 2)",
        (
            "tests/security/test_api_approvals.py::"
            "test_one_person_through_the_console_and_slack_is_one_approver",
        ),
    ),
    Row(
        "alert label `Hostname` carrying a path (`gpu-node-01/../../x`, `/proxy`, `%2F`), "
        "shell (`;reboot`, `&&`, `$(...)`), a header line or a template, fired through "
        "the webhook into the shipped runbooks with the simulated cluster behind",
        "the step fails with `invalid parameters: node=`; no action runs, no API request "
        "names the label, no node changes; the log verifies",
        (
            "tests/security/test_label_injection.py::"
            "test_a_hostile_node_label_fails_the_step_by_name_and_never_reaches_the_cluster",
        ),
    ),
    Row(
        "shell and path characters in every action parameter (node, key, claim, selector)",
        "refused by the parameter model before any API request",
        (
            "tests/actions/test_registry.py::"
            "test_bad_input_is_refused_by_the_parameter_model_before_any_api_call",
        ),
    ),
    Row(
        "template syntax in a label value (`{{ ''.__class__ }}`)",
        "rendered as the text it is, never evaluated",
        (
            "tests/fuzz/test_template_properties.py::"
            "test_a_label_value_is_rendered_as_its_text_never_evaluated",
        ),
    ),
    Row(
        "a runbook template reaching for Python internals (`__class__`, `__globals__`, "
        "`attr()`, subscripts, `lipsum`, `self`, `str.format`, `%`, object methods)",
        "refused by the sandbox with a TemplateError naming the template; no method runs",
        (
            "tests/runbooks/test_templates.py::test_sandbox_escapes_are_refused",
            "tests/runbooks/test_templates.py::test_methods_of_arbitrary_objects_are_never_called",
            "tests/security/test_template_sandbox.py::"
            "test_climbing_to_python_internals_from_a_template_is_refused",
        ),
    ),
    Row(
        "alert text with HTML in the console and in Slack blocks",
        "escaped everywhere",
        (
            "tests/console/test_pages.py::test_alert_text_is_escaped_everywhere",
            "tests/chat/test_blocks.py::test_any_text_stays_within_limits_and_escaped",
        ),
    ),
    Row(
        "webhook times that are no instant: `startsAt` 0001-01-01, 9999-12-31T23:59:59-14:00",
        "400 naming the field; nothing stored (found by the fuzz suite)",
        (
            "tests/security/test_hostile_inputs.py::"
            "test_a_time_that_is_no_real_instant_is_a_400_naming_the_field",
        ),
    ),
    Row(
        "a NUL character in a label, annotation or receiver",
        "400 on SQLite and PostgreSQL alike (PostgreSQL cannot store it; found by the fuzz suite)",
        ("tests/security/test_hostile_inputs.py::test_a_nul_character_is_a_400_on_every_database",),
    ),
    Row(
        "`truncatedAlerts` of 2^40 (past PostgreSQL's integer column)",
        "400 naming the field; nothing stored (found by the fuzz suite)",
        (
            "tests/security/test_hostile_inputs.py::"
            "test_a_truncated_alerts_count_past_any_integer_column_is_a_400",
        ),
    ),
    Row(
        "a NUL character in a `status` or `severity` filter of `GET /api/incidents`",
        "400 naming the parameter (PostgreSQL cannot compare it; found by the fuzz suite)",
        (
            "tests/security/test_hostile_inputs.py::"
            "test_a_nul_in_a_list_filter_is_a_400_naming_the_parameter",
        ),
    ),
    Row(
        "incident numbers `INC-²` (a Unicode digit) and `INC-99999999999999999999`; `limit=²`",
        "404 with the form `INC-42`; 400 with the range (found by the fuzz suite)",
        (
            "tests/security/test_hostile_inputs.py::"
            "test_an_incident_number_that_is_no_incident_is_a_404_with_the_form",
            "tests/security/test_hostile_inputs.py::"
            "test_a_limit_that_is_no_ascii_number_is_a_400_with_the_range",
            "tests/security/test_hostile_inputs.py::"
            "test_a_decision_on_an_incident_number_past_any_integer_is_a_404",
        ),
    ),
    Row(
        "a Node annotated with a BMC address of the attacker's (a recording listener on "
        "127.0.0.2), then `bmc.power_status` with the real ipmitool; a hostname annotated",
        "annotations off by default; when on, refused outside `bmc.allowed_networks`, for a "
        "profile without `allow_annotations`, and for any hostname, naming the node, the "
        "address and the setting; the listener receives nothing; inside the networks with "
        "an allowing profile the read works (issue 19, item 7)",
        (
            "tests/security/test_bmc_annotations.py::"
            "test_an_annotated_bmc_outside_the_allowed_networks_never_receives_the_login",
            "tests/security/test_bmc_annotations.py::"
            "test_an_annotated_hostname_is_refused_not_resolved",
            "tests/security/test_bmc_annotations.py::"
            "test_an_annotated_bmc_inside_the_networks_with_a_profile_that_allows_it_is_read",
            "tests/security/test_bmc_annotations.py::"
            "test_annotations_without_allowed_networks_stop_at_start",
        ),
    ),
    Row(
        "300 warning incidents of one alertname queued, then one critical XID, sent by the "
        "real sender to the fake Slack Web API (SQLite and PostgreSQL)",
        "the critical card is the first message posted; past `slack_flood_cap` (10) the "
        "warnings are one summary message, updated in place as the flood grows; every "
        "incident stays in the database (issue 19, item 9)",
        (
            "tests/chat/test_outbox_floods.py::"
            "test_a_critical_card_is_posted_before_a_flood_of_warnings_that_is_summarised",
            "tests/chat/test_outbox_floods.py::"
            "test_a_critical_card_goes_before_warning_cards_of_many_alertnames",
        ),
    ),
    Row(
        "the environment and command line of a running ipmitool (/proc/PID/environ and "
        "cmdline, read while a relay slows the real ipmi_sim down)",
        "no BMC password in either: it comes through an inherited pipe (`-f /dev/fd/N`), "
        "and the call still works (issue 19, item 15)",
        (
            "tests/bmc/test_secret_leak.py::"
            "test_a_running_ipmitool_holds_the_password_in_neither_argv_nor_environment",
            "tests/bmc/test_ipmi.py::test_password_reaches_ipmitool_only_through_an_inherited_pipe",
        ),
    ),
    Row(
        "another session holds `LOCK TABLE alerts IN ACCESS EXCLUSIVE MODE` while Alertmanager "
        "posts (PostgreSQL)",
        "503 with Retry-After after `database_lock_timeout`, `/readyz` 503; after the release "
        "the retry answers 200 and the alert is stored once",
        (
            "tests/test_storage_locks.py::"
            "test_a_locked_alerts_table_answers_503_and_readyz_fails_until_it_is_released",
            "tests/test_storage_locks.py::"
            "test_a_statement_past_statement_timeout_is_storage_unavailable",
        ),
    ),
    Row(
        "the database dropped, recreated and migrated under the running app (a restore)",
        "the next alert opens an incident with its runbook (200), no restart",
        (
            "tests/test_database_restore.py::"
            "test_a_new_alert_opens_an_incident_with_its_runbook_after_a_restore_without_restart",
        ),
    ),
    Row(
        "the bot's own database role runs UPDATE, DELETE, TRUNCATE, ALTER TABLE ... DISABLE "
        "TRIGGER, DROP TRIGGER or replica mode on `incident_log` (PostgreSQL)",
        "refused (insufficient privilege); ingest and log appends still work; `db upgrade` "
        "refuses a runtime role that owns the tables",
        (
            "tests/test_database_roles.py::"
            "test_the_runtime_role_ingests_and_appends_but_cannot_rewrite_the_log",
            "tests/test_database_roles.py::"
            "test_the_runtime_role_owns_no_table_and_upgrade_refuses_one_that_does",
        ),
    ),
    Row(
        "the owner role (or the SQLite file's writer) disables the triggers and drops the newest "
        "entry and moves the head back, edits an entry, appends a plain SHA-256 entry, or "
        "rewrites the log as a plain chain",
        "`log verify` with the log key exits 1 naming the entry; pre-key entries verify as the "
        "plain chain and the output says where the HMAC starts",
        (
            "tests/test_log_key.py::"
            "test_log_verify_with_the_key_names_the_entry_after_each_tampering",
            "tests/test_log_key.py::"
            "test_logs_written_before_the_key_verify_as_the_plain_chain_and_say_where_the_hmac_starts",
        ),
    ),
    Row(
        "a power loss right after the webhook answered 200 (SQLite, the embedded default)",
        "`synchronous=FULL` in WAL mode: the commit was synced before the answer",
        ("tests/test_db.py::test_sqlite_syncs_every_commit_by_default_and_normal_only_when_asked",),
    ),
    Row(
        "a 64 MiB unsigned chunked POST to `/slack/events`, one whose `Content-Length` lies, "
        "and a declared 2 GiB body to the webhook, the API decisions, Slack and the console",
        "413 once the cap is passed (1 MiB Slack, max_body_bytes, 4096 bytes, 16 KiB), "
        "before reading on; a declared length past it refused unread; the server grows by "
        "less than 3 x the cap",
        (
            "tests/security/test_request_bodies.py::"
            "test_an_unsigned_slack_post_far_past_the_cap_is_a_413_in_bounded_memory",
            "tests/security/test_request_bodies.py::"
            "test_a_declared_length_past_the_cap_is_a_413_before_the_body_is_read",
            "tests/security/test_request_bodies.py::"
            "test_every_post_that_reads_a_body_refuses_a_chunked_flood_with_413",
        ),
    ),
    Row(
        "an alert whose labels and annotations hold `slack:U0CEO12345`, `<@U0CEO12345>`, "
        "`<!channel>`, `<!here>`, `<!subteam^...>`, `<#C...>`, through the webhook to Slack",
        "no live mention in anything posted (escaped, shown as text); the approver who "
        "clicked is still a mention",
        (
            "tests/chat/test_slack_mentions.py::"
            "test_mentions_in_alert_text_reach_slack_as_text_and_a_real_approver_still_is_one",
        ),
    ),
    Row(
        "failed console logins under more invented names than the throttle counts, empty "
        "passwords, then the guessed user's next try",
        "new names refused with 429 once full; the guessed user stays throttled until the "
        "window ends; empty passwords and unknown users cost one scrypt hash each",
        (
            "tests/console/test_login_throttle.py::"
            "test_a_flood_of_invented_names_never_gives_the_guessed_user_fresh_tries",
            "tests/console/test_login_throttle.py::"
            "test_an_empty_password_and_an_unknown_user_cost_a_hash_like_a_wrong_password",
        ),
    ),
    Row(
        "`99999999999999999999` and `²` in every console path, in signed Slack button values, "
        "dialog `private_metadata` (also empty) and state values, and slash commands",
        "console and buttons 400 with the range; dialogs Slack's 200 with the error shown; "
        "slash commands say what to type; never a 500",
        (
            "tests/console/test_numbers.py::test_a_page_whose_incident_number_is_no_id_is_a_400",
            "tests/console/test_numbers.py::test_a_button_whose_path_carries_no_id_is_a_400",
            "tests/console/test_numbers.py::"
            "test_an_event_streams_last_event_id_that_is_no_number_is_a_400",
            "tests/chat/test_slack_numbers.py::"
            "test_a_button_value_that_is_no_id_is_a_400_with_a_message",
            "tests/chat/test_slack_numbers.py::"
            "test_a_dialog_whose_metadata_is_no_id_shows_the_error_in_the_dialog",
            "tests/chat/test_slack_numbers.py::"
            "test_numbers_in_a_dialogs_state_values_are_taken_as_the_text_they_are",
            "tests/chat/test_slack_numbers.py::"
            "test_a_slash_command_with_a_number_that_is_no_id_answers_what_to_type",
        ),
    ),
    Row(
        "a console static file, a 404, a login redirect and an error page",
        "each carries the CSP, X-Frame-Options, nosniff and Referrer-Policy (one middleware)",
        (
            "tests/console/test_pages.py::"
            "test_every_console_response_carries_the_security_headers_static_files_included",
        ),
    ),
    Row(
        "an action that does not answer for an hour (the simulated API holds its node's "
        "requests) while another critical incident opens; a third approved run with "
        "`worker_actions: 2` (SQLite and PostgreSQL)",
        "the other incident's first step is proposed and its first page sent at their due "
        "time (0 s late on the frozen clock), the heartbeat stays fresh, the slow run's "
        "lease is renewed and `/readyz` answers 200; the third run waits for a free slot and "
        "runs when one frees (issue 19, item 3)",
        (
            "tests/runbooks/test_worker_pool.py::"
            "test_an_hour_long_action_delays_no_other_incidents_proposal_page_or_heartbeat",
            "tests/runbooks/test_worker_pool.py::test_a_third_approved_run_waits_for_one_of_two_slots",
        ),
    ),
    Row(
        "a cordon whose node read answers only after the step's timeout (SQLite and PostgreSQL)",
        "the step is timed out and the action cancelled: it stops before the breaker's count "
        "and the patch (`ActionCancelled`, kind `cancelled`); the node stays schedulable "
        "(issue 19, item 3)",
        (
            "tests/runbooks/test_worker_pool.py::"
            "test_a_timed_out_cordon_is_cancelled_before_the_breaker_and_the_patch",
        ),
    ),
    Row(
        "eight incidents approved at once to cordon eight GPU nodes under "
        "`breaker_max_nodes: 1`, three workers on PostgreSQL (one on SQLite); a CLI cordon "
        "while another process holds the breaker's lock",
        "exactly one node cordoned, seven steps failed with the breaker's reason (without "
        "the lock 4 or 5 were cordoned); the CLI cordon waits at most its lock timeout, "
        "changes nothing and says the breaker's lock is held (issue 19, item 4)",
        (
            "tests/runbooks/test_breaker_race.py::"
            "test_eight_cordons_at_once_under_a_cap_of_one_cordon_one_node",
            "tests/runbooks/test_breaker_race.py::"
            "test_a_cordon_from_the_cli_waits_for_the_breaker_lock_the_workers_hold",
        ),
    ),
]

FUZZ = [
    Row(
        "schemathesis: valid and invalid requests generated from `GET /openapi.json` for "
        "every operation (50 per operation and mode, derandomized), the webhook token on "
        "the webhook and a personal token on the decisions, on SQLite and PostgreSQL",
        "no 5xx; every status, content type, header and body as the document says; "
        "invalid requests refused with 4xx",
        (
            "tests/fuzz/test_openapi.py::"
            "test_every_answer_conforms_to_the_document_and_none_is_a_server_error",
        ),
    ),
    Row(
        "hypothesis: any bytes, the recorded notification with any field replaced, any "
        "time in startsAt/endsAt, any label text, as a webhook body",
        "a payload ingest can store (real UTC times, no NUL) or PayloadInvalid (400 with "
        "a message); never another exception",
        (
            "tests/fuzz/test_webhook_properties.py::"
            "test_any_bytes_are_a_payload_or_a_400_with_a_message",
            "tests/fuzz/test_webhook_properties.py::"
            "test_the_recorded_notification_with_any_field_replaced_is_a_payload_or_a_400",
            "tests/fuzz/test_webhook_properties.py::test_any_time_is_a_real_utc_instant_or_a_400",
            "tests/fuzz/test_webhook_properties.py::"
            "test_any_label_text_is_kept_as_text_or_refused_by_length",
        ),
    ),
    Row(
        "hypothesis: runbook YAML (random text, YAML-ish fragments, nested data, a valid "
        "runbook with one value replaced, random bytes in a file)",
        "RunbookInvalid with problems at real positions; never another exception",
        ("tests/runbooks/test_loader_properties.py::",),
    ),
    Row(
        "hypothesis: template text built from template syntax, dunder names and shell "
        "characters; reviewed templates over hostile labels",
        "bounded text or a TemplateError; nothing from inside Python in the output; no "
        "context method runs",
        (
            "tests/fuzz/test_template_properties.py::"
            "test_reviewed_templates_over_hostile_labels_render_or_refuse_and_never_crash",
            "tests/fuzz/test_template_properties.py::"
            "test_any_template_text_renders_bounded_text_or_is_a_template_error",
        ),
    ),
    Row(
        "atheris (libFuzzer) on the ipmitool, nvidia-smi, dcgmi and ibstat parsers, seeded "
        "with the recorded outputs, 3 s each with a fixed seed",
        "typed facts or ValueError naming the line; no other exception, no hang past 5 s",
        (
            "tests/fuzz/test_parsers_atheris.py::"
            "test_every_parser_returns_facts_or_a_value_error_for_any_input",
            "tests/fuzz/test_parsers_atheris.py::"
            "test_a_crash_other_than_value_error_fails_with_the_exception",
        ),
    ),
]


def _outcomes(junit: Path) -> dict[str, str]:
    """`path::function[params]` -> passed, failed, skipped or error."""
    found = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        module = case.get("classname", "").replace(".", "/")
        name = f"{module}.py::{case.get('name')}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                outcome = {"failure": "failed"}.get(child.tag, child.tag)
        found[name] = outcome
    return found


def _tallies(path: Path) -> dict[str, dict[str, object]]:
    if not path.exists():
        return {}
    return {record["name"]: record for record in json.loads(path.read_text())}


def _figures(row: Row, outcomes: dict[str, str], tallies: dict[str, dict[str, object]]) -> str:
    def ours(name: str) -> bool:
        return any(
            name == t or name.startswith(t + "[") or t.endswith("::") and name.startswith(t)
            for t in row.tests
        )

    results = Counter(outcome for name, outcome in outcomes.items() if ours(name))
    if not results:
        return "not run"
    parts = [", ".join(f"{n} {outcome}" for outcome, n in sorted(results.items()))]
    tried = 0
    statuses: Counter[str] = Counter()
    for name, record in tallies.items():
        if ours(name):
            tried += int(str(record["tried"]))
            statuses.update({str(k): int(str(v)) for k, v in dict(record["by_outcome"]).items()})
    if tried:
        detail = ", ".join(f"{key}: {n}" for key, n in sorted(statuses.items()))
        parts.append(f"{tried} inputs ({detail})")
    return "; ".join(parts)


def _table(rows: list[Row], outcomes: dict[str, str], tallies: dict[str, dict[str, object]]) -> str:
    lines = [
        "| fault or bad input | expected behaviour | test | result of a real run |",
        "| --- | --- | --- | --- |",
    ]
    for row in rows:
        tests = "<br>".join(f"`{test.removesuffix('::')}`" for test in row.tests)
        figures = _figures(row, outcomes, tallies)
        lines.append(f"| {row.fault} | {row.expected} | {tests} | {figures} |")
    return "\n".join(lines)


def _replace(text: str, section: str, body: str) -> str:
    start, end = f"<!-- {section}:start -->", f"<!-- {section}:end -->"
    block = f"{start}\n{body}\n{end}"
    if start in text:
        return re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: block, text, flags=re.S)
    return text.rstrip("\n") + "\n\n" + block + "\n"


def main(argv: list[str]) -> int:
    target = Path(argv[1]) if len(argv) > 1 else ROOT / "docs" / "reliability.md"
    paths = sorted({test.split("::")[0] for row in SECURITY + FUZZ for test in row.tests})
    with tempfile.TemporaryDirectory() as tmp:
        junit, tallies = Path(tmp) / "junit.xml", Path(tmp) / "tallies.json"
        env = {**os.environ, "RUNBOOK_BOT_TEST_FUZZ_FIGURES": str(tallies)}
        command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"]
        run = subprocess.run(
            [*command, f"--junitxml={junit}", *paths], cwd=ROOT, env=env, check=False
        )
        outcomes, figures = _outcomes(junit), _tallies(tallies)
    where = "`.venv/bin/python -m tests.fuzz.figures docs/reliability.md`"
    security = (
        "## Security checks\n\nGenerated by " + where + " from one run of the tests named "
        "(pass counts include every parametrization, on SQLite and PostgreSQL). A row with "
        "failures is a defect the run found: its test says what the fix must do.\n\n"
        + _table(SECURITY, outcomes, figures)
    )
    fuzz = (
        "## Fuzzing\n\nGenerated by the same run; inputs are what each fuzz test tried and "
        "what came back (HTTP statuses, or the parser and its run count).\n\n"
        + _table(FUZZ, outcomes, figures)
    )
    text = target.read_text() if target.exists() else "# Reliability\n"
    text = _replace(_replace(text, "security", security), "fuzz", fuzz)
    target.write_text(text)
    print(f"wrote {target}; pytest exited {run.returncode}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
