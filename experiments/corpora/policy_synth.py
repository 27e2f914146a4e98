"""A seeded generator of the paper's synthetic versioned-policy corpus.

Enterprise policies and runbooks state facts (durations, limits, thresholds) that change over
about two years. Each *topic* is one such fact living in one policy document of four or five
paragraphs; every revision changes the value in exactly one paragraph (a one-value edit).
Some runbooks ``depends_on`` a policy and quote its value; they are updated after a policy
change only sometimes and after a lag, so some go on quoting a stale value. At a configurable
rate, a topic gets an injected Slack/chat rumor stating a value the topic never takes.

Every random choice comes from ``random.Random`` streams derived from ``cfg.seed`` (one stream
per concern, so the rumor rate or the propagation rate does not move any other draw); the
same config gives byte-identical files. ``datasets/policy_synth/README.md`` documents the
design and the measured statistics of the committed corpus.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

from experiments.grading import contains_answer, normalise
from smartvector.chunking import chunk_text, diff_chunks
from smartvector.sources import SOURCE_AUTHORITY

# --- configuration ------------------------------------------------------------------------


@dataclass
class PolicySynthConfig:
    """Knobs of the generator; the defaults give the committed corpus (258 vectors, 138
    queries). Usable as a Hydra structured config."""

    seed: int = 0
    n_topics: int = 31  # policy documents, one fact each (at most len(FACTS))
    versions_min: int = 2  # versions per policy, spread evenly over [min, max]
    versions_max: int = 4
    start: str = "2024-01-01"  # first day of the time span (UTC)
    end: str = "2025-12-31"  # last day of the time span (inclusive)
    initial_window_days: int = 90  # every policy's version 1 appears in the first N days
    min_version_gap_days: int = 45  # between two versions, and before the query window
    query_window_days: int = 30  # `current` queries are asked in the last N days
    five_paragraph_fraction: float = 0.35  # share of policy+runbook docs with 5 paragraphs
    n_dependents: int = 10  # runbooks, each depending on one distinct policy
    dependent_update_prob: float = 0.6  # share of (runbook, policy change) pairs propagated
    dependent_lag_min_days: int = 3
    dependent_lag_max_days: int = 45
    contradiction_rate: float = 0.25  # share of topics that get an injected rumor
    rumor_recent_prob: float = 0.6  # rumor after the latest version (else between two)
    authority_age_correlation: float = 0.4  # P(a revision goes out via a lower channel)
    authority_noise: float = 0.03  # half-width of the uniform jitter added to authority
    lower_channels: list[str] = field(default_factory=lambda: ["wiki", "email"])
    dependent_channels: list[str] = field(default_factory=lambda: ["technical_doc", "wiki"])
    rumor_channels: list[str] = field(default_factory=lambda: ["slack", "chat"])
    n_current_queries: int = 62
    n_as_of_queries: int = 56
    n_dependent_queries: int = 20


def _round_half_up(x: float) -> int:
    return math.floor(x + 0.5 + 1e-9)


def _parse_day(value: str, name: str) -> date:
    try:
        return date.fromisoformat(value)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be an ISO date YYYY-MM-DD, got {value!r}") from None


def validate(cfg: PolicySynthConfig) -> None:
    """Raise ``ValueError`` naming the first field that is out of range."""
    for name in (
        "five_paragraph_fraction", "dependent_update_prob", "contradiction_rate",
        "rumor_recent_prob", "authority_age_correlation",
    ):  # fmt: skip
        value = getattr(cfg, name)
        if not 0.0 <= value <= 1.0:
            raise ValueError(f"{name} must be in [0, 1], got {value!r}")
    if not 0.0 <= cfg.authority_noise <= 0.5:
        raise ValueError(f"authority_noise must be in [0, 0.5], got {cfg.authority_noise!r}")
    for name in (
        "n_topics", "n_dependents", "n_current_queries", "n_as_of_queries",
        "n_dependent_queries", "query_window_days",
    ):  # fmt: skip
        if getattr(cfg, name) < 0:
            raise ValueError(f"{name} must be >= 0, got {getattr(cfg, name)!r}")
    if cfg.n_topics > len(FACTS):
        raise ValueError(f"n_topics must be <= {len(FACTS)} (the fact bank), got {cfg.n_topics}")
    if cfg.n_dependents > cfg.n_topics:
        raise ValueError(f"n_dependents must be <= n_topics, got {cfg.n_dependents}")
    if cfg.versions_min < 1:
        raise ValueError(f"versions_min must be >= 1, got {cfg.versions_min}")
    if cfg.versions_max < cfg.versions_min:
        raise ValueError(f"versions_max must be >= versions_min, got {cfg.versions_max}")
    if cfg.initial_window_days < 1:
        raise ValueError(f"initial_window_days must be >= 1, got {cfg.initial_window_days}")
    if cfg.min_version_gap_days < 2:
        raise ValueError(f"min_version_gap_days must be >= 2, got {cfg.min_version_gap_days}")
    if cfg.dependent_lag_min_days < 1:
        raise ValueError(
            f"dependent_lag_min_days must be >= 1, got {cfg.dependent_lag_min_days}"
        )
    if cfg.dependent_lag_max_days < cfg.dependent_lag_min_days:
        raise ValueError(
            "dependent_lag_max_days must be >= dependent_lag_min_days, "
            f"got {cfg.dependent_lag_max_days}"
        )
    start = _parse_day(cfg.start, "start")
    end = _parse_day(cfg.end, "end")
    if start >= end:
        raise ValueError(f"start must be before end, got {cfg.start} >= {cfg.end}")
    window_start = (end - start).days + 1 - cfg.query_window_days
    need = cfg.initial_window_days + cfg.versions_max * cfg.min_version_gap_days + 1
    if window_start < need:
        raise ValueError(
            f"min_version_gap_days: the span {cfg.start}..{cfg.end} minus the query window "
            f"has {window_start} days, {need} needed for versions_max={cfg.versions_max} "
            "versions this far apart"
        )
    for name, allowed in (
        ("lower_channels", SOURCE_AUTHORITY),
        ("dependent_channels", SOURCE_AUTHORITY),
        ("rumor_channels", SOURCE_AUTHORITY),
    ):
        values = list(getattr(cfg, name))
        if not values or any(v not in allowed for v in values):
            raise ValueError(f"{name} must be a non-empty list of source types, got {values}")


# --- the fact bank ------------------------------------------------------------------------

TEAM_SHORT = {
    "Information Security": "security",
    "IT Operations": "IT",
    "Site Reliability Engineering": "SRE",
    "Platform Engineering": "platform",
    "Finance": "finance",
    "People Operations": "HR",
    "Legal and Compliance": "legal",
    "Data Governance": "data governance",
    "Procurement": "procurement",
    "Customer Support": "support leadership",
}


@dataclass(frozen=True)
class Fact:
    """One policy fact: its document, value ladder and the wording around the value.

    ``fact``, ``claim`` and ``dep_step`` contain ``{v}``, the value. ``trend`` is the usual
    direction of change along ``ladder`` (+1 up, -1 down, 0 either).
    """

    key: str
    title: str
    home: str
    team: str
    ladder: tuple[str, ...]
    trend: int
    purpose: str
    fact: str
    questions: tuple[str, ...]
    claim: str
    dep_title: str
    dep_step: str
    dep_questions: tuple[str, ...]


def _days(unit: str, *ns: int) -> tuple[str, ...]:
    return tuple(f"{n} {unit}" for n in ns)


FACTS: tuple[Fact, ...] = (
    Fact(
        "password_expiry", "Password Management Standard", "policy_doc", "Information Security",
        _days("days", 30, 45, 60, 90, 120, 180, 365), 0,
        "This standard sets the minimum rules for how passwords on company accounts are "
        "created, stored and changed.",
        "Passwords on interactive user accounts expire every {v}. The identity provider asks "
        "for a new password at the first sign-in after that point, and recent passwords "
        "cannot be reused.",
        ("How often do I have to change my password?",
         "When does my login password expire?",
         "What is the maximum age of a user password before a reset is forced?"),
        "passwords now expire every {v}",
        "Service Account Secret Rotation Runbook",
        "Rotate the secret so that no service account password is older than {v}, the expiry "
        "interval set by the Password Management Standard.",
        ("How often must service account secrets be rotated?",
         "How old can a service account password get before the rotation runbook has to be "
         "run?"),
    ),
    Fact(
        "session_timeout", "Web Session Management Standard", "policy_doc",
        "Information Security", _days("minutes", 15, 20, 30, 45, 60, 90, 120), -1,
        "This standard describes how internal web applications start, keep and end user "
        "sessions.",
        "Authenticated sessions in internal web applications end after {v} without user "
        "activity, and the user is sent back to the sign-in page.",
        ("How long can I stay idle before an internal web app logs me out?",
         "After how much inactivity do internal application sessions expire?",
         "What is the idle session timeout for internal web applications?"),
        "internal apps now log you out after {v} of inactivity",
        "Internal Web Application Launch Checklist",
        "Configure the idle session timeout to {v}, the value required by the Web Session "
        "Management Standard.",
        ("What idle timeout should a new internal web application be configured with before "
         "launch?",
         "When launching an internal app, how long should idle sessions last?"),
    ),
    Fact(
        "backup_retention", "Backup and Restore Policy", "policy_doc", "IT Operations",
        _days("weeks", 4, 5, 6, 8, 10, 13, 52), 1,
        "This policy defines which systems are backed up, how backups are protected and how "
        "long they are kept.",
        "Nightly backups of production databases are retained for {v} before they are purged "
        "from the backup vault.",
        ("How long are production database backups kept?",
         "How far back can we restore a production database from the backup vault?",
         "What is the retention period for nightly database backups?"),
        "db backups are only kept for {v} now",
        "Database Restore Runbook",
        "Pick a restore point from the backup vault; points older than {v} are purged under "
        "the Backup and Restore Policy and cannot be used.",
        ("How far back can I pick a restore point when restoring a database?",
         "During a database restore, what is the oldest backup that is still available?"),
    ),
    Fact(
        "log_retention", "Logging and Monitoring Standard", "policy_doc", "Information Security",
        _days("months", 13, 48, 60, 72, 84, 120), 1,
        "This standard sets out what security events are logged, where logs are stored and "
        "who may read them.",
        "Security and audit logs are stored in the central log platform for {v} and are "
        "deleted automatically at the end of that period.",
        ("How long do we keep audit logs?",
         "What is the retention period for security logs in the central log platform?",
         "When are security log entries automatically deleted?"),
        "audit logs only get kept for {v} now",
        "Security Incident Log Collection Guide",
        "Export the relevant log ranges early: the central platform keeps audit logs for {v} "
        "under the Logging and Monitoring Standard.",
        ("How long do I have to pull audit logs for an incident investigation before they are "
         "deleted?",
         "When collecting logs for an incident, how long are audit records available?"),
    ),
    Fact(
        "upload_size", "File Sharing Standard", "policy_doc", "IT Operations",
        ("10 MB", "25 MB", "50 MB", "100 MB", "250 MB", "500 MB", "1 GB", "2 GB"), 1,
        "This standard covers the approved service for sharing files inside and outside the "
        "company and the limits that apply to it.",
        "A single file uploaded to the company file-sharing service may be at most {v}; larger "
        "files are rejected by the upload dialog.",
        ("What is the largest file I can upload to the file-sharing service?",
         "Is there a maximum upload size for shared files?",
         "How big can a single upload to the company file share be?"),
        "the file share upload limit is {v} now",
        "Sharing Large Files with Customers How-To",
        "Check the file size first: the File Sharing Standard caps a single upload at {v}, so "
        "split or compress anything bigger.",
        ("What size limit applies when sending a large file to a customer through the file "
         "share?",
         "How large can a file be before I need to split it for sharing with a customer?"),
    ),
    Fact(
        "incident_ack", "Incident Response Policy", "policy_doc", "Site Reliability Engineering",
        _days("minutes", 2, 3, 4, 5, 8, 10), -1,
        "This policy describes how incidents are detected, declared, worked and closed, and "
        "who is responsible at each stage.",
        "The on-call engineer must acknowledge a critical incident page within {v} of the "
        "alert firing and open an incident channel straight away.",
        ("How quickly must on-call acknowledge a critical page?",
         "What is the acknowledgement deadline for a critical incident?",
         "How long does the on-call engineer have to respond to a critical alert?"),
        "on-call has {v} to ack a critical page now",
        "On-Call Paging Escalation Runbook",
        "If the primary has not acknowledged the page within {v}, as the Incident Response "
        "Policy requires, escalate to the secondary on-call.",
        ("When should a critical page be escalated to the secondary on-call?",
         "How long do we wait for the primary to acknowledge before escalating a page?"),
    ),
    Fact(
        "mfa_grace", "Multi-Factor Authentication Standard", "policy_doc",
        "Information Security", _days("working days", 2, 3, 4, 5, 6, 7), -1,
        "This standard requires a second authentication factor on company accounts and "
        "describes the approved factors.",
        "New employees must enrol a second authentication factor within {v} of their account "
        "being created; after that, sign-in is blocked until enrolment is completed.",
        ("How long do new hires have to set up MFA?",
         "What is the grace period for enrolling in multi-factor authentication?",
         "When does sign-in get blocked for a new account without a second factor?"),
        "new hires only get {v} to set up MFA now",
        "New Hire IT Onboarding Checklist",
        "Remind the new hire to enrol a second factor; the Multi-Factor Authentication "
        "Standard blocks sign-in if this is not done within {v}.",
        ("During onboarding, by when must a new employee finish MFA enrolment?",
         "How long after the account is created can a new starter sign in without a second "
         "factor?"),
    ),
    Fact(
        "access_review", "Access Review Policy", "policy_doc", "Legal and Compliance",
        _days("months", 2, 3, 4, 6, 8, 12), -1,
        "This policy makes sure that people only keep the access they still need for their "
        "job.",
        "Managers must review and recertify the access rights of their direct reports every "
        "{v}; access that is not recertified is revoked.",
        ("How often do managers have to recertify their team's access?",
         "What is the cadence of user access reviews?",
         "How frequently are access rights reviewed?"),
        "access reviews are every {v} now",
        "Manager Access Recertification Guide",
        "Open the recertification campaign in the identity portal; under the Access Review "
        "Policy each manager completes it every {v}.",
        ("How often does a manager need to complete the recertification campaign?",
         "How often is the access recertification repeated?"),
    ),
    Fact(
        "expense_approval", "Travel and Expense Policy", "policy_doc", "Finance",
        ("$250", "$500", "$750", "$1,000", "$1,500", "$2,000", "$2,500"), 1,
        "This policy explains which business expenses the company pays for and how they are "
        "claimed and approved.",
        "Any single expense above {v} needs written approval from the employee's cost-centre "
        "manager before it is reimbursed.",
        ("Above what amount does an expense need manager approval?",
         "What is the approval threshold for expense claims?",
         "How much can I expense without getting my manager to approve it?"),
        "expenses over {v} need manager sign-off now",
        "Expense Claim Submission How-To",
        "Attach the manager's written approval to any line item over {v}, the threshold in the "
        "Travel and Expense Policy.",
        ("When submitting an expense claim, which items need the manager's approval attached?",
         "What amount triggers an approval attachment on an expense claim?"),
    ),
    Fact(
        "pto_carryover", "Paid Time Off Policy", "policy_doc", "People Operations",
        _days("days", 5, 8, 10, 12, 15, 20, 25), 0,
        "This policy describes how paid time off is earned, requested and approved.",
        "Employees may carry up to {v} of unused paid time off into the next calendar year; "
        "any balance above that is forfeited.",
        ("How much unused vacation can I roll over to next year?",
         "What is the PTO carry-over limit?",
         "How many leave days can be carried into the new year?"),
        "you can only carry over {v} of PTO now",
        "Year-End Leave Balance Guide for Managers",
        "Tell team members with large balances that only {v} carries over under the Paid Time "
        "Off Policy.",
        ("How much leave can my team members keep at year end?",
         "At year end, how many unused PTO days carry over?"),
    ),
    Fact(
        "oncall_handoff", "On-Call Policy", "policy_doc", "Site Reliability Engineering",
        ("07:00 UTC", "08:00 UTC", "09:00 UTC", "10:00 UTC", "11:00 UTC", "13:00 UTC",
         "15:00 UTC"), 0,
        "This policy sets out how on-call rotations are staffed, handed over and compensated.",
        "The weekly on-call rotation hands over on Mondays at {v}, when the outgoing engineer "
        "walks the incoming engineer through open issues.",
        ("At what time does the on-call shift change on Mondays?",
         "When is the weekly on-call handover?",
         "What time do we hand off the pager each week?"),
        "on-call handoff moved to {v} on Mondays",
        "On-Call Handover Checklist",
        "Join the handover call on Monday at {v}, the time fixed by the On-Call Policy, and "
        "review every open incident.",
        ("When should the outgoing on-call engineer join the handover call?",
         "What time is the weekly handover call for the on-call rotation?"),
    ),
    Fact(
        "vpn_idle", "Remote Access Standard", "policy_doc", "IT Operations",
        _days("hours", 3, 5, 6, 9, 10, 12), -1,
        "This standard describes how staff connect to internal systems from outside the "
        "office.",
        "VPN connections that carry no traffic for {v} are disconnected by the concentrator, "
        "and the user has to authenticate again.",
        ("How long can the VPN sit idle before it disconnects?",
         "What is the VPN inactivity timeout?",
         "After how long without traffic does the VPN drop my connection?"),
        "VPN now drops after {v} idle",
        "Remote Work Setup Guide",
        "Expect the VPN to disconnect after {v} without traffic, as set by the Remote Access "
        "Standard, and reconnect from the tray icon.",
        ("How long can a remote worker's VPN stay idle before it disconnects?",
         "When working from home, after how long without traffic will the VPN drop?"),
    ),
    Fact(
        "data_deletion", "Data Retention and Deletion Policy", "policy_doc", "Data Governance",
        _days("calendar days", 20, 28, 30, 45, 60, 90), -1,
        "This policy states how long customer data is kept and how it is removed when it is "
        "no longer needed.",
        "When a customer closes their account, all of their personal data must be erased from "
        "production systems within {v} of the closure request.",
        ("How long do we have to delete a customer's data after they close their account?",
         "What is the deadline for erasing personal data after an account closure?",
         "Within what time must customer personal data be removed once an account is closed?"),
        "customer data must be wiped within {v} of closure now",
        "Account Closure Data Erasure Runbook",
        "Run the erasure job and confirm it finished within {v}, the deadline in the Data "
        "Retention and Deletion Policy.",
        ("By when must the erasure job for a closed account be complete?",
         "How long does the team have to finish a data erasure request?"),
    ),
    Fact(
        "api_rate_limit", "Public API Usage Policy", "technical_doc", "Platform Engineering",
        tuple(f"{n} requests per minute" for n in (60, 100, 120, 200, 300, 500, 600, 900)), 1,
        "This document describes the limits and fair-use rules for clients of the public "
        "API.",
        "Each API key may make at most {v} to the public API; requests beyond that receive an "
        "error response telling the client to retry later.",
        ("What is the rate limit on the public API?",
         "How many calls can one API key make each minute?",
         "How fast can a client call the public API before it gets throttled?"),
        "the public API is capped at {v} per key now",
        "Partner Integration Onboarding Guide",
        "Size the partner's batch jobs to stay under {v} per key, the cap in the Public API "
        "Usage Policy.",
        ("How fast can a partner integration call the API?",
         "What throughput should a partner's batch job stay under?"),
    ),
    Fact(
        "deploy_approvals", "Change Management Policy", "policy_doc", "Platform Engineering",
        ("1 approval", "2 approvals", "3 approvals", "4 approvals", "5 approvals"), 1,
        "This policy describes how changes reach production safely and who has to agree to "
        "them.",
        "Every production deployment needs {v} from engineers outside the authoring team "
        "before the pipeline will promote it.",
        ("How many approvals does a production deploy need?",
         "How many reviewers have to sign off before code goes to production?",
         "What sign-off count is required to promote a build to production?"),
        "prod deploys need {v} now",
        "Production Release Runbook",
        "Collect {v} on the release ticket, as the Change Management Policy requires, before "
        "pressing promote.",
        ("How many sign-offs must the release ticket have before promotion?",
         "Before promoting a release, how many approvals should be collected?"),
    ),
    Fact(
        "vendor_review", "Third-Party Risk Policy", "policy_doc", "Procurement",
        _days("months", 9, 15, 18, 24, 30, 36), -1,
        "This policy describes how the company assesses and monitors the suppliers it relies "
        "on.",
        "Critical vendors are reassessed for security and privacy risk every {v}, using the "
        "standard vendor questionnaire.",
        ("How often are critical vendors reassessed?",
         "What is the review cycle for high-risk suppliers?",
         "How frequently do we redo vendor security assessments?"),
        "critical vendors get reviewed every {v} now",
        "Vendor Security Questionnaire Guide",
        "Schedule the next questionnaire {v} after the last one, the reassessment cycle in the "
        "Third-Party Risk Policy.",
        ("When should the next vendor questionnaire be scheduled?",
         "How long after the last assessment is a critical vendor due again?"),
    ),
    Fact(
        "patch_deadline", "Endpoint Patch Management Standard", "policy_doc", "IT Operations",
        _days("days", 2, 3, 4, 6, 7, 14), -1,
        "This standard covers how operating system and application updates reach company "
        "laptops.",
        "Critical security patches must be installed on company laptops within {v} of "
        "release; devices that miss the deadline lose network access.",
        ("How long do I have to install a critical patch on my laptop?",
         "What is the deadline for applying critical security updates to laptops?",
         "How soon after release must critical laptop patches be installed?"),
        "laptops have to be patched within {v} now or they get cut off",
        "Laptop Patch Compliance Report Guide",
        "Flag every device that has not installed a critical patch within {v}, the deadline in "
        "the Endpoint Patch Management Standard.",
        ("Which devices should be flagged in the patch compliance report?",
         "How old can a missing critical patch be before a laptop is flagged?"),
    ),
    Fact(
        "password_length", "Password Complexity Standard", "policy_doc", "Information Security",
        _days("characters", 8, 10, 12, 14, 15, 16, 20), 1,
        "This standard describes what makes an acceptable password for company systems.",
        "Every new password must be at least {v} long and may not contain the user's name or "
        "email address.",
        ("What is the minimum password length?",
         "How long does a password need to be?",
         "How many characters must my password have at minimum?"),
        "passwords need to be {v} minimum now",
        "Shared Mailbox Setup Guide",
        "Set a password of at least {v}, following the Password Complexity Standard, and "
        "store it in the team vault.",
        ("How long should the password for a shared mailbox be?",
         "When setting up a shared mailbox, what password length is needed?"),
    ),
    Fact(
        "lockout_threshold", "Account Lockout Standard", "policy_doc", "Information Security",
        _days("failed attempts", 3, 4, 5, 6, 8, 10), -1,
        "This standard protects accounts against password guessing by locking them after "
        "repeated failures.",
        "An account is locked for review after {v} in a row; the service desk can unlock it "
        "once the user's identity is verified.",
        ("How many wrong passwords before my account gets locked?",
         "After how many bad sign-in tries is an account locked out?",
         "What is the account lockout threshold?"),
        "accounts lock after {v} now",
        "Service Desk Account Unlock Procedure",
        "Confirm the lock reason in the directory: the Account Lockout Standard locks an "
        "account after {v}.",
        ("When handling an unlock request, after how many failed sign-ins is an account "
         "locked?",
         "How many failed tries does the service desk expect before a lockout?"),
    ),
    Fact(
        "recovery_time", "Disaster Recovery Plan", "policy_doc", "Site Reliability Engineering",
        _days("hours", 18, 30, 36, 72, 96, 120), -1,
        "This plan describes how the company keeps serving customers when a data centre or "
        "cloud region is lost.",
        "Customer-facing services must be restored within {v} of a declared disaster; this "
        "recovery time objective is what the architecture is built to meet.",
        ("What is the recovery time objective for customer-facing services?",
         "How fast must customer-facing systems be back after a disaster?",
         "What is our RTO?"),
        "the RTO for customer-facing services is {v} now",
        "Regional Failover Runbook",
        "Complete the failover and validation inside {v}, the recovery time objective in the "
        "Disaster Recovery Plan.",
        ("How long does the team have to complete a regional failover?",
         "What time budget applies to a full regional failover?"),
    ),
    Fact(
        "uptime_sla", "Customer Service Level Agreement Policy", "policy_doc",
        "Legal and Compliance",
        ("99.5%", "99.7%", "99.8%", "99.9%", "99.95%", "99.99%"), 1,
        "This policy describes the service levels the company commits to in customer "
        "contracts.",
        "The platform commits to a monthly availability of {v} for paying customers; months "
        "below that earn service credits.",
        ("What uptime do we promise paying customers?",
         "What is the monthly availability commitment in our SLA?",
         "Below what availability do customers get service credits?"),
        "the SLA is {v} uptime now",
        "Monthly SLA Report Procedure",
        "Compare the measured availability with the {v} commitment in the Customer Service "
        "Level Agreement Policy and list any credits owed.",
        ("What availability target is the monthly SLA report checked against?",
         "When preparing the SLA report, what uptime figure triggers credits?"),
    ),
    Fact(
        "support_first_response", "Customer Support Policy", "policy_doc", "Customer Support",
        _days("business hours", 2, 4, 8, 12, 16, 24), -1,
        "This policy sets the service standards for answering customer support requests.",
        "Support tickets from standard-plan customers receive a first human response within "
        "{v} of being opened.",
        ("How fast do standard-plan customers get a first reply from support?",
         "What is the first-response target for support tickets?",
         "Within how long must support answer a new ticket?"),
        "support first response target is {v} now",
        "Support Queue Triage Guide",
        "Sort the queue by age and pick up any ticket approaching {v} without a reply, the "
        "first-response target in the Customer Support Policy.",
        ("Which tickets should be picked up first during queue triage?",
         "How old can an unanswered ticket get before triage must pick it up?"),
    ),
    Fact(
        "email_retention", "Email Retention Policy", "policy_doc", "Legal and Compliance",
        ("1 year", "2 years", "3 years", "4 years", "5 years", "7 years", "10 years"), 1,
        "This policy describes how long email is kept and when it may be deleted.",
        "Email in employee mailboxes is retained for {v} and then deleted, unless a legal hold "
        "applies to the mailbox.",
        ("How long is company email kept before deletion?",
         "What is the mailbox retention period?",
         "When do old emails get purged from our mailboxes?"),
        "email gets deleted after {v} now",
        "Legal Hold Procedure",
        "Apply the hold before the mailbox content ages past {v}, when the Email Retention "
        "Policy would otherwise delete it.",
        ("How quickly must a legal hold be applied before email is deleted?",
         "Under the legal hold procedure, how old can mail get before it is gone?"),
    ),
    Fact(
        "signing_limit", "Signature Authority Policy", "policy_doc", "Finance",
        ("$10,000", "$25,000", "$50,000", "$75,000", "$100,000", "$150,000", "$250,000"), 1,
        "This policy states who may sign contracts and commitments on behalf of the company.",
        "Directors may sign customer and supplier contracts worth up to {v}; anything larger "
        "needs a vice president's signature.",
        ("Up to what contract value can a director sign?",
         "What is a director's signing limit?",
         "When does a contract need a VP signature instead of a director's?"),
        "directors can only sign up to {v} now",
        "Contract Routing Guide",
        "Route contracts above {v} to a vice president, per the Signature Authority Policy; "
        "smaller ones go to the director.",
        ("Which contracts have to be routed to a vice president?",
         "At what contract value does routing switch from director to VP?"),
    ),
    Fact(
        "code_review_turnaround", "Code Review Guidelines", "technical_doc",
        "Platform Engineering", _days("business days", 1, 2, 3, 4, 5), -1,
        "These guidelines describe how code is reviewed before it is merged.",
        "Reviewers should leave a first review on a pull request within {v} of being "
        "requested; requests left longer are escalated to the team lead.",
        ("How quickly should a pull request be reviewed?",
         "What is the expected turnaround for code reviews?",
         "How long can a review request sit before it is escalated?"),
        "PR reviews are expected within {v} now",
        "Team Lead Review Escalation Checklist",
        "Escalate review requests that have waited longer than {v}, the turnaround in the Code "
        "Review Guidelines.",
        ("When should a team lead escalate a waiting review request?",
         "How long can a pull request wait before the lead escalates it?"),
    ),
    Fact(
        "cert_renewal", "TLS Certificate Management Standard", "technical_doc",
        "Platform Engineering", _days("days", 21, 28, 35, 40, 50, 75), 1,
        "This standard describes how TLS certificates are issued, stored and renewed.",
        "Certificates must be renewed no later than {v} before they expire; monitoring alerts "
        "the owning team from that point on.",
        ("How long before expiry must a TLS certificate be renewed?",
         "When do we have to renew a certificate?",
         "What is the renewal window for TLS certificates?"),
        "certs must be renewed {v} before expiry now",
        "Certificate Renewal Runbook",
        "Start the renewal at least {v} before the expiry date, as the TLS Certificate "
        "Management Standard requires.",
        ("When should the certificate renewal runbook be started?",
         "How far ahead of expiry should a certificate renewal begin?"),
    ),
    Fact(
        "screen_lock", "Workstation Security Standard", "policy_doc", "Information Security",
        _days("seconds", 60, 120, 180, 300, 600, 900), -1,
        "This standard lists the security settings every company workstation must have.",
        "Laptops must lock the screen automatically after {v} without keyboard or mouse "
        "input.",
        ("How soon does my laptop screen have to lock when I am away?",
         "What is the automatic screen lock time for laptops?",
         "After how long idle must a workstation lock itself?"),
        "screens must auto-lock after {v} now",
        "Laptop Provisioning Checklist",
        "Set the screen lock to trigger after {v} of inactivity, the value from the "
        "Workstation Security Standard.",
        ("What screen lock setting should a new laptop get during provisioning?",
         "When provisioning a laptop, after how long idle should it lock?"),
    ),
    Fact(
        "security_training", "Security Awareness Training Policy", "policy_doc",
        "Information Security", _days("working days", 10, 15, 20, 30, 45, 60), -1,
        "This policy makes sure that everyone knows the basics of working securely.",
        "New starters must finish the security awareness course within {v} of their start "
        "date; managers are notified about anyone who is late.",
        ("How long do new employees have to complete security awareness training?",
         "What is the deadline for the security course after joining?",
         "By when must a new starter finish security training?"),
        "new starters have {v} to do the security course now",
        "Manager Onboarding Checklist",
        "Make sure the new starter completes the security awareness course within {v}, as the "
        "Security Awareness Training Policy requires.",
        ("By when should a manager make sure the new starter has done the security course?",
         "What deadline for security training should a manager track for a new hire?"),
    ),
    Fact(
        "parental_leave", "Parental Leave Policy", "policy_doc", "People Operations",
        _days("weeks", 12, 14, 16, 18, 20, 24, 26), 1,
        "This policy describes the leave and support available to employees who become "
        "parents.",
        "Primary caregivers receive {v} of fully paid parental leave, which can start up to a "
        "month before the expected birth or adoption.",
        ("How much paid parental leave does a primary caregiver get?",
         "What is the paid leave entitlement for new parents?",
         "How long is fully paid parental leave?"),
        "paid parental leave is {v} now",
        "Parental Leave Request How-To",
        "Enter the full {v} of paid leave in the HR portal, the entitlement under the Parental "
        "Leave Policy.",
        ("How much leave should I enter in the HR portal for parental leave?",
         "When requesting parental leave, how much paid leave can I book?"),
    ),
    Fact(
        "office_days", "Hybrid Work Policy", "policy_doc", "People Operations",
        ("one day a week", "two days a week", "three days a week", "four days a week",
         "five days a week"), 1,
        "This policy explains how hybrid roles split their time between home and the office.",
        "Employees in hybrid roles are expected in the office {v}, on days agreed with their "
        "team.",
        ("How many days do I need to be in the office?",
         "What is the in-office requirement for hybrid employees?",
         "How often are hybrid staff expected on site?"),
        "it's {v} in the office now",
        "Desk Booking Guide",
        "Book a desk for each office day; hybrid staff are expected in {v} under the Hybrid "
        "Work Policy.",
        ("How many desk bookings does a hybrid employee need each week?",
         "How often should I book a desk as a hybrid worker?"),
    ),
    Fact(
        "purchase_quotes", "Procurement Policy", "policy_doc", "Procurement",
        ("$5,000", "$15,000", "$20,000", "$30,000", "$40,000", "$60,000"), 1,
        "This policy describes how the company buys goods and services and gets value for "
        "money.",
        "Purchases above {v} require three competing quotes before a purchase order can be "
        "raised.",
        ("When do I need three quotes for a purchase?",
         "What purchase value triggers competitive quotes?",
         "Above what amount must procurement get multiple bids?"),
        "three quotes are needed for anything over {v} now",
        "Purchase Order Request How-To",
        "Attach three quotes to any request above {v}, the threshold in the Procurement "
        "Policy.",
        ("Which purchase order requests need quotes attached?",
         "When raising a PO, at what value do I need to attach quotes?"),
    ),
    Fact(
        "data_export", "Customer Data Export Standard", "policy_doc", "Data Governance",
        _days("records", 500, 1000, 2000, 5000, 10000, 50000), 1,
        "This standard controls how customer data leaves production systems.",
        "Any export of customer data containing more than {v} needs approval from the data "
        "protection officer before it runs.",
        ("How large can a customer data export be without DPO approval?",
         "When does a data export need the data protection officer to sign off?",
         "What is the size limit for unapproved customer data exports?"),
        "exports over {v} need DPO sign-off now",
        "Analytics Data Pull Procedure",
        "Split the pull or get approval first if it covers more than {v}, per the Customer "
        "Data Export Standard.",
        ("When does an analytics data pull need approval?",
         "What size of customer data pull needs DPO approval in the analytics procedure?"),
    ),
    Fact(
        "guest_wifi", "Guest Network Standard", "policy_doc", "IT Operations",
        ("1 device", "2 devices", "3 devices", "4 devices", "5 devices", "6 devices"), 0,
        "This standard describes the wireless network offered to visitors and its limits.",
        "A guest wireless voucher can be used on at most {v} at the same time; visitors who "
        "need more connections ask reception for another voucher.",
        ("How many devices can a visitor connect with one guest wifi voucher?",
         "Is there a limit on how many gadgets a guest can put on the office wifi?",
         "How many simultaneous connections does a guest network voucher allow?"),
        "guest wifi vouchers only work on {v} now",
        "Reception Visitor Check-In Procedure",
        "Hand the visitor a wireless voucher and tell them it works on {v}, per the Guest "
        "Network Standard.",
        ("What should reception tell visitors about how many devices their wifi voucher "
         "covers?",
         "At check-in, how many devices can the visitor put on the guest wifi?"),
    ),
    Fact(
        "build_retention", "Build Artifact Retention Standard", "technical_doc",
        "Platform Engineering", _days("builds", 10, 20, 25, 30, 50, 100), 1,
        "This standard describes what the artifact registry keeps and for how long.",
        "The artifact registry keeps the most recent {v} of every service; older builds are "
        "garbage-collected nightly.",
        ("How many builds does the artifact registry keep per service?",
         "How far back can I roll back to an old build?",
         "What is the build retention in the artifact registry?"),
        "the registry only keeps {v} per service now",
        "Service Rollback Runbook",
        "Choose the rollback target among the last {v} kept by the registry under the Build "
        "Artifact Retention Standard.",
        ("How many previous builds can I roll back to?",
         "When rolling back a service, how far back are builds available?"),
    ),
    Fact(
        "db_connections", "Database Usage Standard", "technical_doc", "Platform Engineering",
        _days("connections", 50, 80, 100, 150, 200, 300, 400), 1,
        "This standard describes how services use the shared production database clusters.",
        "Each application may hold at most {v} to a shared production database cluster at any "
        "one time.",
        ("How many connections can an app open to the shared database?",
         "What is the per-application connection cap on shared production databases?",
         "Is there a limit on database connections per service?"),
        "apps are capped at {v} to the shared db now",
        "Connection Pool Configuration Guide",
        "Set the pool maximum so the service never exceeds {v}, the cap in the Database Usage "
        "Standard.",
        ("What should the connection pool maximum be set to?",
         "How large can a service's database connection pool be?"),
    ),
    Fact(
        "postmortem_deadline", "Post-Incident Review Policy", "policy_doc",
        "Site Reliability Engineering", _days("business days", 6, 7, 8, 10, 15, 20), -1,
        "This policy makes sure the company learns from every major incident.",
        "A written post-incident review for every major incident is due within {v} of the "
        "incident being resolved.",
        ("When is the postmortem due after a major incident?",
         "How long do we have to write up a post-incident review?",
         "What is the deadline for the incident review document?"),
        "postmortems are due within {v} now",
        "Incident Commander Checklist",
        "Book the review meeting and assign an author so the write-up lands within {v}, the "
        "deadline in the Post-Incident Review Policy.",
        ("By when must the incident commander make sure the review write-up is done?",
         "What write-up deadline does the incident commander track after resolution?"),
    ),
    Fact(
        "mobile_passcode", "Mobile Device Standard", "policy_doc", "Information Security",
        ("4 digits", "5 digits", "6 digits", "8 digits", "10 digits", "12 digits"), 1,
        "This standard lists the controls every phone or tablet that reaches company data "
        "must have.",
        "Phones and tablets that access company email or files must be protected by a passcode "
        "of at least {v}, and they erase themselves after repeated wrong entries.",
        ("How long does my phone passcode have to be?",
         "What is the minimum passcode length on mobile devices?",
         "How many numbers does the PIN on a work phone need?"),
        "phone passcodes need {v} now",
        "Enrolling a Phone in Device Management How-To",
        "Set a passcode of at least {v} when prompted, as the Mobile Device Standard requires; "
        "enrolment fails with a shorter one.",
        ("What passcode do I need when enrolling my phone in device management?",
         "How long must the passcode be to enrol a phone?"),
    ),
    Fact(
        "leaver_access", "Offboarding Policy", "policy_doc", "IT Operations",
        ("1 hour", "2 hours", "4 hours", "8 hours", "24 hours", "48 hours"), -1,
        "This policy covers what happens to accounts, devices and data when someone leaves "
        "the company.",
        "All access of a departing employee must be revoked within {v} of their last working "
        "day ending.",
        ("How quickly must a leaver's access be removed?",
         "What is the deadline to revoke access when someone leaves?",
         "How long after an employee's last day can their accounts stay active?"),
        "leavers' access must be cut within {v} now",
        "Leaver Account Deprovisioning Runbook",
        "Disable the directory account and revoke tokens within {v}, as the Offboarding Policy "
        "requires.",
        ("How fast should a leaver's accounts be deprovisioned?",
         "When deprovisioning a leaver, how long do I have to revoke their tokens?"),
    ),
    Fact(
        "hotel_cap", "Business Travel Policy", "policy_doc", "Finance",
        tuple(f"${n} per night" for n in (150, 175, 200, 225, 275, 300, 350)), 1,
        "This policy explains how business trips are approved and booked.",
        "Hotel stays are reimbursed up to {v} in most cities; finance publishes a short list "
        "of high-cost cities with their own cap.",
        ("How much can I spend on a hotel per night?",
         "What is the nightly hotel cap for business travel?",
         "What is the maximum hotel rate the company reimburses?"),
        "the hotel cap is {v} now",
        "Business Trip Booking How-To",
        "Pick a hotel at or below {v}, the nightly cap in the Business Travel Policy, unless "
        "the city is on the high-cost list.",
        ("What hotel rate should I book at when planning a business trip?",
         "When booking a trip, what nightly price is allowed?"),
    ),
    Fact(
        "meal_allowance", "Meal Allowance Policy", "policy_doc", "Finance",
        tuple(f"${n} per day" for n in (35, 40, 45, 55, 65, 80, 95)), 1,
        "This policy sets the allowance for meals while travelling on business.",
        "Employees travelling on business can claim meals up to {v} without itemised "
        "receipts.",
        ("What is the daily meal allowance when travelling?",
         "How much can I claim for food each day on a business trip?",
         "What is the per diem for meals?"),
        "meal per diem is {v} now",
        "Per Diem Claim Guide",
        "Claim meals at the flat rate of {v} set by the Meal Allowance Policy for each travel "
        "day.",
        ("What flat rate do I enter for meals in a per diem claim?",
         "How much can be claimed for meals on the per diem form?"),
    ),
    Fact(
        "sandbox_quota", "Cloud Sandbox Policy", "technical_doc", "Platform Engineering",
        _days("sandboxes", 2, 3, 4, 5, 6, 8), 1,
        "This policy describes the short-lived cloud environments developers may create for "
        "experiments.",
        "Each developer may run at most {v} at the same time; the request portal refuses new "
        "ones until an old one is torn down.",
        ("How many sandbox environments can one developer have running?",
         "What is the per-developer limit on cloud sandboxes?",
         "How many concurrent sandboxes am I allowed?"),
        "you can only have {v} at once now",
        "Sandbox Request How-To",
        "Check your running environments first: the Cloud Sandbox Policy allows {v} per "
        "developer, so tear one down if you are at the limit.",
        ("Why was my sandbox request refused, and how many can I run?",
         "Before requesting a sandbox, how many may I already have running?"),
    ),
    Fact(
        "firewall_exceptions", "Network Firewall Standard", "policy_doc",
        "Information Security", _days("open exceptions", 2, 3, 5, 8, 10, 15), -1,
        "This standard describes how network traffic is filtered and how exceptions are "
        "granted.",
        "A team may hold at most {v} to the firewall rules at any time, and each one must name "
        "an owner and an expiry date.",
        ("How many firewall exceptions can a team have?",
         "Is there a cap on temporary firewall rule exceptions per team?",
         "What is the limit on a team's outstanding firewall exceptions?"),
        "teams can only have {v} on the firewall now",
        "Firewall Exception Request How-To",
        "Count your team's current exceptions before asking: the Network Firewall Standard "
        "allows {v} per team.",
        ("How many firewall exceptions may my team already have when I request a new one?",
         "Before requesting a firewall exception, what team limit should I check?"),
    ),
    Fact(
        "email_attachment", "Email Usage Standard", "policy_doc", "IT Operations",
        ("15 MB", "20 MB", "30 MB", "35 MB", "40 MB", "75 MB"), 1,
        "This standard describes acceptable use of company email.",
        "Outgoing email messages may carry attachments totalling at most {v}; larger messages "
        "bounce back to the sender.",
        ("What is the maximum attachment size for outgoing email?",
         "How big can email attachments be?",
         "When will an email bounce because the attachments are too large?"),
        "email attachments are limited to {v} now",
        "Sending Reports to Auditors How-To",
        "Check the attachment total against the {v} limit in the Email Usage Standard; use the "
        "file share for anything larger.",
        ("How large can a report attachment be when emailing auditors?",
         "When sending audit reports by email, what attachment size is allowed?"),
    ),
    Fact(
        "dependency_fix", "Open Source Dependency Policy", "technical_doc",
        "Platform Engineering", _days("calendar days", 2, 3, 5, 7, 10, 14), -1,
        "This policy describes how third-party libraries are chosen, tracked and kept up to "
        "date.",
        "A dependency with a known critical vulnerability must be upgraded or removed within "
        "{v} of the advisory being published.",
        ("How fast must we fix a critical vulnerability in a third-party library?",
         "What is the deadline for upgrading a dependency with a critical advisory?",
         "How long do teams have to patch a vulnerable open source package?"),
        "critical dependency vulns have to be fixed within {v} now",
        "Vulnerable Dependency Upgrade Runbook",
        "Merge the upgrade and redeploy within {v} of the advisory, the deadline in the Open "
        "Source Dependency Policy.",
        ("How long does the upgrade runbook allow for fixing a vulnerable dependency?",
         "By when must a vulnerable library be upgraded and redeployed?"),
    ),
    Fact(
        "visitor_notice", "Office Visitor Policy", "policy_doc", "People Operations",
        _days("business hours", 6, 18, 36, 48, 72), 0,
        "This policy explains how guests are invited to and hosted in company offices.",
        "Hosts must register a visitor in the front-desk system at least {v} before the visit "
        "so that a badge can be printed.",
        ("How far in advance do I have to register a visitor?",
         "What notice does the front desk need before a guest arrives?",
         "When must a visitor be registered before their visit?"),
        "visitors have to be registered {v} ahead now",
        "Hosting a Customer Visit Guide",
        "Register every guest at least {v} ahead in the front-desk system, as the Office "
        "Visitor Policy requires.",
        ("How early should customer visitors be registered with the front desk?",
         "When hosting a customer, how far ahead must guests be registered?"),
    ),
)


# --- text building ------------------------------------------------------------------------

_NAMES = (
    "a.nguyen", "b.okafor", "c.lindqvist", "d.haddad", "e.moreau", "f.tanaka", "g.silva",
    "h.kowalski", "i.brennan", "j.alvarez", "k.osei", "l.fischer", "m.rossi", "n.petrova",
    "o.dubois", "p.sharma", "q.li", "r.mensah", "s.ivanova", "t.obrien", "u.costa",
    "v.jensen", "w.khan", "y.sato",
)  # fmt: skip
_RUMOR_ROOMS = ("general", "random", "eng-chat", "it-help", "watercooler", "team-leads")

_INTRO_TAIL = (
    "It replaces any earlier guidance on the subject; where another document disagrees with "
    "it, this {kind} takes precedence.",
    "It is part of the company's policy framework and is revised whenever the underlying "
    "requirement changes.",
    "Questions about how it applies to a particular team should go to the owners named "
    "below.",
)
_SCOPE = (
    "## Scope\nThis {kind} applies to all employees, contractors and temporary staff, in every "
    "office and when working remotely. It also applies to suppliers who act on the company's "
    "behalf where their contract says so.",
    "## Who this applies to\nEveryone who works for or on behalf of the company, including "
    "interns and contractors, and every system or process the company runs, whether it is "
    "hosted internally or by a provider.",
    "## Scope\nEvery business unit and subsidiary is covered by this {kind}. Teams may set "
    "stricter local rules, but no local rule may be weaker than what is written here.",
)
_REQUIREMENT_TAIL = (
    "Where tooling can enforce this automatically it does; everything else is checked during "
    "internal audits.",
    "Teams are expected to meet this requirement without waiting for a reminder.",
    "Automated checks report deviations to the owners, who follow them up with the teams "
    "involved.",
)
_OWNERSHIP = (
    "## Ownership and enforcement\nThe {team} team owns this {kind} and keeps it up to date. "
    "Suspected breaches should be reported to them; repeated or deliberate breaches are "
    "handled under the disciplinary procedure.",
    "## Ownership\nOwner: {team}. Managers are responsible for making sure their teams follow "
    "this {kind}, and the owner reports on compliance to the leadership team every quarter.",
    "## Enforcement\nThis {kind} is maintained by {team}. Non-compliance found during audits "
    "is tracked to closure, and access may be suspended until it is fixed.",
)
_FIFTH = (
    "## Exceptions\nAn exception to this {kind} needs a written business justification, "
    "approval from {team} and an end date. Approved exceptions are recorded in the risk "
    "register and reviewed before they expire.",
    "## Related documents\nRead this {kind} together with the employee handbook and the "
    "procedures published on the intranet. Where they conflict, {team} decides which one "
    "applies.",
    "## Review\n{team} reviews this {kind} at least once a year, and whenever a regulator, an "
    "auditor or an incident shows that it needs to change. Changes are announced to all "
    "staff.",
)
_DEP_INTRO = (
    "This {dkind} explains how to carry out the task step by step. It implements the "
    "{policy}; if anything here disagrees with the {pkind}, the {pkind} wins.",
    "Use this {dkind} whenever the task below comes up. It is based on the {policy} and is "
    "maintained by the people who do the work.",
    "A practical {dkind} for the team. The rules behind it come from the {policy}, which is "
    "the authoritative source.",
)
_DEP_BEFORE = (
    "## Before you start\nMake sure you have the access you need, a ticket to record the work "
    "in, and a colleague who can review it if something looks unusual.",
    "## Before you start\nCheck that you have the right permissions in the admin console and "
    "that nobody else is already working on the same request.",
    "## Before you start\nRead the whole page first. Keep the request ticket open and note "
    "anything unexpected in it as you go.",
)
_DEP_FIRST = (
    "Open or pick up the ticket and confirm the request is genuine.",
    "Confirm who asked for the work and link the ticket to this page.",
)
_DEP_LAST = (
    "Record what you did in the ticket and close it once the requester confirms.",
    "Write a short note in the ticket describing the outcome and any follow-up.",
)
_DEP_TROUBLE = (
    "## If something goes wrong\nStop, leave things as they are, and ask in the {team} help "
    "channel. Do not improvise a workaround that bypasses the {pkind}.",
    "## If something goes wrong\nEscalate to the {team} team through their service portal and "
    "mention this page so they know which steps you already did.",
)
_DEP_HISTORY = (
    "## Page history\nThis page is maintained by the team that performs the task. Suggested "
    "changes go through the documentation review queue; the {pkind} itself is owned by "
    "{team}.",
    "## Page history\nLast reviewed by the owning team. If the {policy} changes, this page "
    "should be updated to match.",
)
_RUMOR = (
    "heads up, {claim} per {short}",
    "fyi {claim}, heard it from someone in {short}",
    "psa: {claim}. someone from {short} mentioned it in standup",
    "did anyone else hear that {claim}? that's what {short} told our team",
)
_MONTHS = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip


def _kind(title: str) -> str:
    last = title.split()[-1].lower()
    return {"how-to": "how-to guide"}.get(last, last)


def _slug(title: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def _lower_first(text: str) -> str:
    return text[0].lower() + text[1:] if len(text) > 1 and text[1].islower() else text


def _date_phrase(t: datetime) -> str:
    return f"{_MONTHS[t.month - 1]} {t.day}, {t.year}"


# --- generation ---------------------------------------------------------------------------


@dataclass
class _Topic:
    slot: int
    fact: Fact
    values: list[str]  # value of version 1, 2, ... of the policy
    rumor_value: str
    days: list[int] = field(default_factory=list)  # day offset of each policy version
    times: list[datetime] = field(default_factory=list)
    has_dependent: bool = False
    dep_times: list[datetime] = field(default_factory=list)
    dep_values: list[str] = field(default_factory=list)


def _rng(cfg: PolicySynthConfig, stream: str) -> random.Random:
    return random.Random(f"policy_synth/{cfg.seed}/{stream}")


def _balanced(n: int, lo: int, hi: int) -> list[int]:
    """``n`` values cycling through ``lo..hi`` (so their sum does not depend on the seed)."""
    span = hi - lo + 1
    return [lo + i % span for i in range(n)]


def _conflicts(a: str, b: str) -> bool:
    return contains_answer(a, b) or contains_answer(b, a)


def _pick_values(
    fact: Fact, n_versions: int, used: list[str], rng: random.Random
) -> tuple[list[str], str] | None:
    """``n_versions`` distinct values on a monotone path and a never-taken rumor value, none
    of which can be confused with a value another topic already uses; None if impossible."""
    avail = [v for v in fact.ladder if not any(_conflicts(v, u) for u in used)]
    if len(avail) < n_versions + 1:
        return None
    first = rng.randrange(len(avail) - n_versions + 1)
    path = avail[first : first + n_versions]
    direction = fact.trend or rng.choice((1, -1))
    if direction < 0:
        path.reverse()
    near = (first - 2, first - 1, first + n_versions, first + n_versions + 1)
    near = [i for i in near if 0 <= i < len(avail)]
    rumor = avail[rng.choice(near)]
    return path, rumor


def _first_fitting(
    bank: Sequence[Fact], n_versions: int, used: list[str], rng: random.Random
) -> tuple[Fact | None, tuple[list[str], str] | None]:
    """The first fact of ``bank`` that can take ``n_versions`` values, and those values."""
    for fact in bank:
        picked = _pick_values(fact, n_versions, used, rng)
        if picked is not None:
            return fact, picked
    return None, None


def _choose_topics(cfg: PolicySynthConfig) -> list[_Topic]:
    n_dep = cfg.n_dependents
    dep_versions = _balanced(n_dep, cfg.versions_min, cfg.versions_max)
    other_versions = _balanced(cfg.n_topics - n_dep, cfg.versions_min, cfg.versions_max)
    vrng = _rng(cfg, "versions")
    vrng.shuffle(dep_versions)
    vrng.shuffle(other_versions)
    versions = dep_versions + other_versions
    bank = list(FACTS)
    _rng(cfg, "facts").shuffle(bank)
    value_rng = _rng(cfg, "values")
    used: list[str] = []
    topics: list[_Topic] = []
    for slot, n_versions in enumerate(versions):
        fact, picked = _first_fitting(bank, n_versions, used, value_rng)
        if picked is None:
            raise ValueError(
                f"n_topics: cannot give {cfg.n_topics} topics values that no other topic "
                "uses; lower n_topics or versions_max"
            )
        bank.remove(fact)
        path, rumor = picked
        used.extend([*path, rumor])
        topics.append(_Topic(slot, fact, path, rumor, has_dependent=slot < n_dep))
    return topics


def _at(base: datetime, day: int, rng: random.Random) -> datetime:
    """A business-hours time on day ``day`` after ``base``."""
    return base + timedelta(days=day, hours=rng.randint(8, 17), minutes=rng.randrange(60))


def _authority(source_type: str, cfg: PolicySynthConfig, rng: random.Random) -> float:
    jitter = rng.uniform(-cfg.authority_noise, cfg.authority_noise)
    return round(min(1.0, max(0.0, SOURCE_AUTHORITY[source_type] + jitter)), 2)


def _policy_paragraphs(fact: Fact, rng: random.Random, five: bool) -> list[str]:
    """The paragraphs of a policy document; the third holds ``{v}``."""
    kind = _kind(fact.title)
    fmt = {"kind": kind, "team": fact.team}
    paragraphs = [
        f"# {fact.title}\n{fact.purpose} {rng.choice(_INTRO_TAIL).format(**fmt)}",
        rng.choice(_SCOPE).format(**fmt),
        f"## Requirement\n{fact.fact} {rng.choice(_REQUIREMENT_TAIL)}",
        rng.choice(_OWNERSHIP).format(**fmt),
    ]
    if five:
        paragraphs.append(rng.choice(_FIFTH).format(**fmt))
    return paragraphs


def _dependent_paragraphs(fact: Fact, rng: random.Random, five: bool) -> list[str]:
    """The paragraphs of a runbook quoting the policy; the third holds ``{v}``."""
    fmt = {
        "dkind": _kind(fact.dep_title),
        "pkind": _kind(fact.title),
        "policy": fact.title,
        "team": fact.team,
    }
    steps = f"- {rng.choice(_DEP_FIRST)}\n- {fact.dep_step}\n- {rng.choice(_DEP_LAST)}"
    paragraphs = [
        f"# {fact.dep_title}\n{rng.choice(_DEP_INTRO).format(**fmt)}",
        rng.choice(_DEP_BEFORE),
        f"## Steps\n{steps}",
        rng.choice(_DEP_TROUBLE).format(**fmt),
    ]
    if five:
        paragraphs.append(rng.choice(_DEP_HISTORY).format(**fmt))
    return paragraphs


def _render(paragraphs: Sequence[str], value: str) -> str:
    return "\n\n".join(p.replace("{v}", value) for p in paragraphs)


def _revision_days(v1: int, n_rev: int, hi: int, gap: int, rng: random.Random) -> list[int]:
    """``n_rev`` days in ``[v1 + gap, hi]``, at least ``gap`` apart (uniform spacings)."""
    lo = v1 + gap
    free = hi - lo - (n_rev - 1) * gap
    offsets = sorted(rng.randint(0, free) for _ in range(n_rev))
    return [lo + u + j * gap for j, u in enumerate(offsets)]


def _doc_record(
    doc_id: str, version: int, when: datetime, until: datetime | None, source_type: str,
    authority: float, author: str, text: str, meta: dict[str, Any],
    depends_on: Sequence[str] = (),
) -> dict[str, Any]:  # fmt: skip
    rec: dict[str, Any] = {"doc_id": doc_id, "version": version, "valid_from": _iso(when)}
    if until is not None:
        rec["valid_to"] = _iso(until)
    rec.update(source_type=source_type, authority=authority, author=author)
    if depends_on:
        rec["depends_on"] = list(depends_on)
    rec.update(text=text, meta=meta)
    return rec


def _iso(t: datetime) -> str:
    return t.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _version_docs(
    doc_id: str, times: Sequence[datetime], texts: Sequence[str], channels: Sequence[str],
    authorities: Sequence[float], authors: Sequence[str], metas: Sequence[dict[str, Any]],
    depends_on: Sequence[str] = (),
) -> list[dict[str, Any]]:  # fmt: skip
    out = []
    for k, when in enumerate(times):
        until = times[k + 1] if k + 1 < len(times) else None
        out.append(
            _doc_record(doc_id, k + 1, when, until, channels[k], authorities[k], authors[k],
                        texts[k], metas[k], depends_on)  # fmt: skip
        )
    return out


def generate(cfg: PolicySynthConfig) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Corpus records (grouped by document, versions ascending, documents in order of their
    first version) and query records (sorted by id), for ``write_dataset``."""
    validate(cfg)
    start = _parse_day(cfg.start, "start")
    base = datetime(start.year, start.month, start.day, tzinfo=UTC)
    n_days = (_parse_day(cfg.end, "end") - start).days + 1
    window = n_days - cfg.query_window_days  # first day of the query window
    gap = cfg.min_version_gap_days
    topics = _choose_topics(cfg)
    n_dep = cfg.n_dependents

    n_docs = cfg.n_topics + n_dep
    five = set(_rng(cfg, "mix").sample(range(n_docs), _round_half_up(
        cfg.five_paragraph_fraction * n_docs)))  # fmt: skip

    # (runbook slot, revision index) pairs whose policy change reaches the runbook
    pairs = [(t.slot, k) for t in topics[:n_dep] for k in range(1, len(t.values))]
    _rng(cfg, "propagation").shuffle(pairs)
    propagated = set(pairs[: _round_half_up(cfg.dependent_update_prob * len(pairs))])

    docs: list[list[dict[str, Any]]] = []
    for t in topics:
        r = _rng(cfg, f"topic/{t.slot}")
        fact = t.fact
        v1 = r.randrange(cfg.initial_window_days)
        t.days = [v1, *_revision_days(v1, len(t.values) - 1, window - gap, gap, r)]
        t.times = [_at(base, d, r) for d in t.days]
        channels = [fact.home] + [
            r.choice(cfg.lower_channels) if r.random() < cfg.authority_age_correlation
            else fact.home
            for _ in t.values[1:]
        ]  # fmt: skip
        paragraphs = _policy_paragraphs(fact, r, t.slot in five)
        policy_id = _slug(fact.title)
        docs.append(_version_docs(
            policy_id, t.times, [_render(paragraphs, v) for v in t.values], channels,
            [_authority(c, cfg, r) for c in channels], [r.choice(_NAMES) for _ in t.values],
            [{"topic": fact.key, "role": "policy", "value": v} for v in t.values],
        ))  # fmt: skip
        if not t.has_dependent:
            continue
        d = _rng(cfg, f"dependent/{t.slot}")
        end_first = t.days[1] if len(t.days) > 1 else window
        dep_days = [d.randint(t.days[0] + 1, end_first - 1)]
        t.dep_values = [t.values[0]]
        for k in range(1, len(t.values)):
            lag = d.randint(cfg.dependent_lag_min_days, cfg.dependent_lag_max_days)
            if (t.slot, k) not in propagated:
                continue
            limit = (t.days[k + 1] if k + 1 < len(t.days) else window) - 1
            dep_days.append(min(t.days[k] + lag, limit))
            t.dep_values.append(t.values[k])
        t.dep_times = [_at(base, day, d) for day in dep_days]
        channel = d.choice(cfg.dependent_channels)
        dep_paragraphs = _dependent_paragraphs(fact, d, cfg.n_topics + t.slot in five)
        author = d.choice(_NAMES)
        docs.append(_version_docs(
            _slug(fact.dep_title), t.dep_times, [_render(dep_paragraphs, v) for v in
                                                 t.dep_values],
            [channel] * len(dep_days), [_authority(channel, cfg, d) for _ in dep_days],
            [author] * len(dep_days),
            [{"topic": fact.key, "role": "dependent", "value": v} for v in t.dep_values],
            depends_on=[policy_id],
        ))  # fmt: skip

    order = _rng(cfg, "rumor-order").sample(range(cfg.n_topics), cfg.n_topics)
    for slot in order[: _round_half_up(cfg.contradiction_rate * cfg.n_topics)]:
        t = topics[slot]
        r = _rng(cfg, f"rumor/{slot}")
        if r.random() < cfg.rumor_recent_prob or len(t.days) == 1:
            day = r.randint(t.days[-1] + 1, window - 1)
        else:
            k = r.randrange(len(t.days) - 1)
            day = r.randint(t.days[k] + 1, t.days[k + 1] - 1)
        channel = r.choice(cfg.rumor_channels)
        room = r.choice(_RUMOR_ROOMS)
        text = r.choice(_RUMOR).format(
            claim=t.fact.claim.replace("{v}", t.rumor_value), short=TEAM_SHORT[t.fact.team]
        )
        meta = {"topic": t.fact.key, "role": "rumor", "value": t.rumor_value, "injected": True}
        docs.append([_doc_record(
            f"{channel}-{room}-{slot:03d}", 1, _at(base, day, r), None, channel,
            _authority(channel, cfg, r), r.choice(_NAMES), text, meta,
        )])  # fmt: skip

    docs.sort(key=lambda versions: (versions[0]["valid_from"], versions[0]["doc_id"]))
    corpus = [rec for versions in docs for rec in versions]
    queries = _queries(cfg, topics, base, n_days, window)
    _self_check(corpus, queries, topics)
    return corpus, queries


def _in_force(times: Sequence[datetime], at: datetime) -> int:
    """Index of the version valid at ``at`` (the last one that started at or before it)."""
    k = max(i for i, t in enumerate(times) if t <= at)
    return k


def _queries(
    cfg: PolicySynthConfig, topics: list[_Topic], base: datetime, n_days: int, window: int
) -> list[dict[str, Any]]:
    r = _rng(cfg, "queries")
    specs: list[tuple[str, _Topic, int, datetime]] = []  # kind, topic, template, asked_at
    template_order = {t.slot: r.sample(range(len(t.fact.questions)), len(t.fact.questions))
                      for t in topics}  # fmt: skip
    slot_order = r.sample(topics, len(topics))
    for i in range(cfg.n_current_queries if topics else 0):
        t = slot_order[i % len(topics)]
        template = template_order[t.slot][(i // len(topics)) % len(t.fact.questions)]
        specs.append(("current", t, template, _at(base, r.randint(window, n_days - 1), r)))

    intervals = [(t, k) for t in topics for k in range(len(t.values) - 1)]
    chosen = r.sample(intervals, min(cfg.n_as_of_queries, len(intervals)))
    while len(chosen) < cfg.n_as_of_queries and intervals:
        chosen.append(r.choice(intervals))
    for t, k in chosen:
        day = r.randint(t.days[k] + 1, t.days[k + 1] - 1)
        specs.append(("as_of", t, r.randrange(len(t.fact.questions)), _at(base, day, r)))

    dependents = [t for t in topics if t.has_dependent]
    dep_order = {t.slot: r.sample(range(len(t.fact.dep_questions)),
                                  len(t.fact.dep_questions)) for t in dependents}  # fmt: skip
    for i in range(cfg.n_dependent_queries if dependents else 0):
        t = dependents[i % len(dependents)]
        template = dep_order[t.slot][(i // len(dependents)) % len(t.fact.dep_questions)]
        day = r.randint(t.dep_times[0].toordinal() - base.toordinal() + 1, n_days - 1)
        specs.append(("dependent", t, template, _at(base, day, r)))

    window_start = base + timedelta(days=window)
    rows = []
    for kind, t, template, asked in specs:
        k = _in_force(t.times, asked)
        fact = t.fact
        policy_id = _slug(fact.title)
        dep_id = _slug(fact.dep_title)
        meta: dict[str, Any] = {
            "topic": fact.key, "template": template, "policy_doc": policy_id,
            "version_in_force": k + 1,
        }  # fmt: skip
        if kind == "dependent":
            question = fact.dep_questions[template]
            doc_ids = [dep_id, policy_id]
            j = _in_force(t.dep_times, asked)
            meta.update(dependent_doc=dep_id, dependent_states=t.dep_values[j])
        else:
            question = fact.questions[template]
            doc_ids = [policy_id]
            if t.has_dependent and t.dep_times[0] <= asked:
                doc_ids.append(dep_id)
        if asked < window_start:
            question = f"As of {_date_phrase(asked)}, {_lower_first(question)}"
        rows.append({
            "kind": kind, "asked_at": asked, "text": question, "doc_ids": doc_ids,
            "answer": t.values[k], "stale_answers": list(t.values[:k]), "meta": meta,
            "_slot": t.slot,
        })  # fmt: skip
    rows.sort(key=lambda q: (q["asked_at"], q["_slot"], q["kind"], q["text"]))
    out = []
    for i, q in enumerate(rows, start=1):
        del q["_slot"]
        q["asked_at"] = _iso(q["asked_at"])
        out.append({"id": f"q{i:03d}", **q})
    return out


def _self_check(
    corpus: list[dict[str, Any]], queries: list[dict[str, Any]], topics: list[_Topic]
) -> None:
    """Every text states exactly the value it is meant to, and no other topic's value."""
    all_values = {v for t in topics for v in [*t.values, t.rumor_value]}

    def states(text: str) -> set[str]:  # the substring test is a fast necessary condition
        flat = normalise(text)
        return {v for v in all_values if normalise(v) in flat and contains_answer(text, v)}

    for rec in corpus:
        stated = states(rec["text"])
        if stated != {rec["meta"]["value"]}:
            raise RuntimeError(f"{rec['doc_id']} v{rec['version']} states {sorted(stated)}")
        for chunk in chunk_text(rec["text"]):
            if len(chunk.text) >= 1000:
                raise RuntimeError(f"{rec['doc_id']}: paragraph of {len(chunk.text)} chars")
    for q in queries:
        stated = states(q["text"])
        if stated:
            raise RuntimeError(f"query {q['id']} states {sorted(stated)}")


# --- counting and statistics --------------------------------------------------------------


def _field(rec: Any, name: str) -> Any:
    return rec[name] if isinstance(rec, Mapping) else getattr(rec, name)


def _by_doc(corpus: Iterable[Any]) -> dict[str, list[Any]]:
    groups: dict[str, list[Any]] = {}
    for rec in corpus:
        groups.setdefault(_field(rec, "doc_id"), []).append(rec)
    for versions in groups.values():
        versions.sort(key=lambda rec: _field(rec, "version"))
    return groups


def count_vectors(corpus: Iterable[Any]) -> int:
    """Vectors a store holds after ingesting ``corpus`` with surgical updates: every chunk of
    a document's first version, plus the re-embedded chunks of each later version."""
    total = 0
    for versions in _by_doc(corpus).values():
        chunks = chunk_text(_field(versions[0], "text"))
        total += len(chunks)
        for rec in versions[1:]:
            new = chunk_text(_field(rec, "text"))
            total += diff_chunks(chunks, new).n_reembedded
            chunks = new
    return total


def corpus_stats(corpus: Sequence[Mapping[str, Any]], queries: Sequence[Mapping[str, Any]]
                 ) -> dict[str, Any]:  # fmt: skip
    """The statistics the dataset card reports."""
    groups = _by_doc(corpus)
    roles: dict[str, int] = {}
    for versions in groups.values():
        role = versions[0]["meta"].get("role", "?")
        roles[role] = roles.get(role, 0) + 1
    chunks = {d: len(chunk_text(v[0]["text"])) for d, v in groups.items()}
    edited = [d for d, v in groups.items() if len(v) > 1]
    edits = [(d, len(chunk_text(rec["text"]))) for d, v in groups.items() for rec in v[1:]]
    reembedded = [
        diff_chunks(chunk_text(a["text"]), chunk_text(b["text"])).n_reembedded
        for v in groups.values() for a, b in zip(v, v[1:], strict=False)
    ]  # fmt: skip
    policy_versions = [len(v) for v in groups.values() if v[0]["meta"].get("role") == "policy"]
    end = max(_ts(rec["valid_from"]) for rec in corpus)

    def corr(recs: list[Mapping[str, Any]]) -> float | None:
        if len(recs) < 3:
            return None
        age = np.array([(end - _ts(rec["valid_from"])) / 86400.0 for rec in recs])
        auth = np.array([float(rec["authority"]) for rec in recs])
        if age.std() == 0 or auth.std() == 0:
            return None
        return round(float(np.corrcoef(age, auth)[0, 1]), 3)

    kinds: dict[str, int] = {}
    for q in queries:
        kinds[q["kind"]] = kinds.get(q["kind"], 0) + 1
    policies = [rec for rec in corpus if rec["meta"].get("role") == "policy"]
    revisions = [rec for rec in policies if rec["version"] > 1]
    return {
        "documents": len(groups),
        "documents_by_role": dict(sorted(roles.items())),
        "versions": len(corpus),
        "vectors": count_vectors(corpus),
        "chunks_per_document_mean": round(float(np.mean(list(chunks.values()))), 3),
        "chunks_per_edited_document_mean": round(
            float(np.mean([chunks[d] for d in edited])), 3) if edited else None,
        "chunks_per_edit_mean": round(float(np.mean([n for _, n in edits])), 3)
        if edits else None,
        "reembedded_per_edit_mean": round(float(np.mean(reembedded)), 3) if reembedded else None,
        "versions_per_policy": {str(n): policy_versions.count(n)
                                for n in sorted(set(policy_versions))},
        "versions_per_policy_mean": round(float(np.mean(policy_versions)), 3),
        "injected": sum(1 for rec in corpus if rec["meta"].get("injected") is True),
        "policy_revisions_via_lower_channel": sum(
            1 for rec in revisions if rec["source_type"] not in ("policy_doc", "technical_doc")),
        "policy_revisions": len(revisions),
        "corr_age_authority_policies": corr(policies),
        "corr_age_authority_all_genuine": corr(
            [rec for rec in corpus if rec["meta"].get("injected") is not True]),
        "corr_age_authority_all": corr(list(corpus)),
        "queries": len(queries),
        "queries_by_kind": dict(sorted(kinds.items())),
        "queries_with_stale_answers": sum(1 for q in queries if q["stale_answers"]),
        "dependent_queries_where_runbook_is_stale": sum(
            1 for q in queries if q["kind"] == "dependent"
            and q["meta"]["dependent_states"] != q["answer"]),
    }  # fmt: skip


def _ts(value: str) -> float:
    return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()


# --- writing and command line -------------------------------------------------------------


def write_policy_synth(cfg: PolicySynthConfig, out_dir: str | Path) -> Path:
    """Generate the corpus for ``cfg`` and write it with ``write_dataset``."""
    from experiments.dataset import write_dataset

    return write_dataset(generate(cfg), out_dir)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m experiments.corpora.policy_synth", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--seed", type=int, default=PolicySynthConfig.seed)
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument(
        "--contradiction-rate", type=float, default=PolicySynthConfig.contradiction_rate
    )
    parser.add_argument("--stats", action="store_true", help="print statistics as JSON")
    args = parser.parse_args(argv)
    cfg = PolicySynthConfig(seed=args.seed, contradiction_rate=args.contradiction_rate)
    try:
        out = write_policy_synth(cfg, args.out)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.stats:
        corpus, queries = generate(cfg)
        stats = {"config": asdict(cfg), **corpus_stats(corpus, queries)}
        print(json.dumps(stats, indent=2))
    else:
        print(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
