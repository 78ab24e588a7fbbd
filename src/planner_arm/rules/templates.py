"""The rule-based planner's plan templates: one per kind of goal, as text that is easy to read
and to change, and `kinds()` that parses them once. `planner.py` fills them in."""

from __future__ import annotations

from functools import cache
from typing import NamedTuple

# Each [kind]: its label and usual complexity, the cue words that point at it, then its steps.
# Kinds are in priority order: equal cue scores go to the earlier kind, and the goal's leading
# verb counts three times, so "Fix the XSS hole" is a bug fix but "Audit login for XSS" is not.
# A step: `key arm tier seconds keep after : action`, then a line of criteria split by " | ".
# A shorter plan drops the highest `keep` first; `after` names earlier keys ("-" none); arm "*"
# is chosen from the goal. The last step is the check, after every step nothing else depends
# on; [pad] steps lengthen a plan. {the} is "the <subject>", {doc} the document, {goal} the goal.
# The goal's specifics, each "" when it names none: {in_env} " in staging", {ver} " (v2.3.1)",
# {in_files} " in auth/login.py", {refs} " (JIRA-12)"; {env} and {code} name a default instead.
# A specific no kept step names is added to the part's main (keep 0) step.
TEMPLATES = """
[security_review] a security or privacy review, complexity 0.55
cues: security, secure, vulnerability, pii, privacy, gdpr, hipaa, compliance, audit
cues: penetration test, pentest, threat model, secret, credential, leak, encryption, xss
cues: injection, csrf, cve, permission, access control, owasp, sanitise
gather retriever 1 25 2 - : Locate the code, configuration and data flows of {the}{in_files}{refs}
  Entry points and data stores mapped | Where personal data flows is known
pii guardian 2 40 0 gather : Scan {the}{in_env} for personal data, secrets and credentials
  Every PII or secret finding has a location | No credentials in source or logs
vulns guardian 3 60 1 gather : Review {the} for injection, access-control and other vulnerabilities
  Each finding rated by severity | Checked against the OWASP Top 10
policy guardian 2 30 3 pii : Check {the} against the applicable privacy and security policies
  Each policy requirement marked met or not | Gaps linked to findings
fixes coder 3 45 2 pii,vulns : Propose code changes that fix the findings in {the}
  Each high-severity finding has a fix | Fixes do not change intended behaviour
check judge 2 30 0 - : Validate that the review of {the} is complete
  Every finding has a severity and an owner | Every step's acceptance criteria are met
[bug_fix] a bug fix, complexity 0.55
cues: fix, bug, error, crash, fail, failure, broken, regression, exception, defect, incorrect
cues: wrong, debug, repair, resolve, flaky, not working, hang, traceback, glitch
locate retriever 1 20 2 - : Search the code, tests and issue reports behind {the}{in_files}{refs}
  Code and tests related to {the} located | Related bug reports or issues identified
analyse coder 3 60 1 locate : Analyse the code behind {the} to find the root cause
  Root cause identified with file and line | Why the failure happens is written down
reproduce coder 3 40 3 analyse : Write a test that reproduces {the}
  The test fails on the current code | The test isolates the reported scenario
patch coder 4 45 0 analyse : Patch {code} to fix {the}
  The patch addresses the root cause | No unrelated behaviour changes | Code follows house style
verify executor 2 90 2 reproduce,patch : Run the full test suite against the fix for {the}{ver}
  The reproducing test passes with the patch | All existing tests pass | No errors or timeouts
check judge 2 30 0 - : Validate that the fix for {the} meets the acceptance criteria
  The root cause is fixed, not masked | Every step's acceptance criteria are met
[deployment] a deployment or operations task, complexity 0.6
cues: deploy, deployment, release, rollout, roll out, ship, provision, upgrade, migrate
cues: production, staging, kubernetes, k8s, docker, server, infrastructure, ci, pipeline, scale
cues: rollback, restart, install, configure, set up, helm, terraform, cluster
gather retriever 1 20 2 - : Gather the deployment configuration and runbook for {the}{in_env}{refs}
  Target environment and version identified | Runbook and rollback steps located
build executor 2 90 1 gather : Build and pre-check the release artefacts of {the}{ver}
  Artefacts built reproducibly | Pre-deployment checks pass
secrets guardian 2 30 4 gather : Check {the}{in_env} for exposed secrets and unsafe settings
  No secrets in images, logs or config | Permissions follow least privilege
deploy executor 3 120 0 build,secrets : Deploy {the}{ver} to {env}
  Deployment completes without errors | The new version is serving traffic
smoke executor 2 45 3 deploy : Run smoke tests and health checks on {the}{in_env} after deployment
  Health checks pass | Key user paths respond correctly
check judge 2 30 0 - : Validate that the deployment of {the}{ver} to {env} is healthy
  Error rates and latency within normal bounds | Every step's acceptance criteria are met
[documentation] a documentation task, complexity 0.35
cues: document, documentation, docs, readme, guide, tutorial, manual, docstring, changelog
cues: release notes, wiki, api reference, faq, handbook, write up
gather retriever 1 25 1 - : Read the code, docs and open questions about {the}{in_files}{refs}
  Behaviour to document listed | Outdated or missing sections identified
outline planner 2 20 3 gather : Outline the structure and audience of {doc}
  Sections and audience defined | Each section has a stated purpose
write coder 3 60 0 outline : Write {doc}
  Every outlined section written | Terms are explained at first use
examples executor 2 45 2 write : Run the examples and commands in {doc}{ver}
  Every example runs as written | Outputs shown match real outputs
check judge 2 30 0 - : Validate that {doc} is accurate and complete
  Statements match the actual behaviour | Every step's acceptance criteria are met
[data_analysis] a data analysis, complexity 0.5
cues: data, dataset, csv, analyse, analysis, statistics, metrics, trend, chart, plot, visualise
cues: dashboard, sales, revenue, sql, correlation, forecast, kpi, churn, cohort, spreadsheet, excel
locate retriever 1 20 2 - : Locate the data sources and definitions for {the}{in_files}{refs}
  Every data source identified | Field meanings and units recorded
prepare coder 3 60 1 locate : Write a script that loads and cleans the data for {the}
  Dropped or fixed rows are counted and explained | The script runs end to end without errors
analyse executor 2 60 0 prepare : Run the analysis of {the} and compute the key figures
  Key figures computed with their method | Results are reproducible from the script
privacy guardian 2 20 4 analyse : Screen the data and results for {the} for personal data
  No personal data in the shared results | Aggregates are too coarse to identify anyone
report retriever 2 40 3 analyse : Summarise the results for {the} with figures and caveats
  Each conclusion backed by a figure | Caveats and data gaps stated
check judge 2 30 0 - : Validate that the figures for {the} are correct
  Figures spot-checked against the raw data | Conclusions follow from the figures
[research] a research question, complexity 0.45
cues: research, investigate, compare, comparison, study, explore, learn, understand, explain
cues: survey, find out, literature, best, alternatives, options, pros and cons, tradeoffs
cues: trade offs, evaluate, recommend, overview, state of the art, paper
search retriever 1 30 0 - : Search the docs and the web for sources on {the}{ver}{refs}
  At least three relevant sources found | Each source's date and origin recorded
context retriever 1 20 3 - : Read the provided context and earlier work on {the}
  Relevant facts from the context extracted | Open questions listed
factcheck judge 2 30 2 search : Fact-check the key claims about {the} against primary sources
  Each key claim traced to a source | Conflicting claims flagged
synthesise retriever 2 40 1 search,context,factcheck : Summarise the findings on {the}
  The answer addresses the question directly | Every claim cites a source
check judge 2 30 0 - : Validate that the answer on {the} is complete and sourced
  No claim lacks a source | The answer covers every part of the question
[feature] a feature or implementation task, complexity 0.6
cues: implement, add, build, create, develop, feature, support, endpoint, api, function, code
cues: integrate, refactor, extend, enable, introduce, module, component, page, ui, tests, script
gather retriever 1 25 2 - : Gather the requirements and the code related to {the}{in_files}{refs}
  Requirements for {the} listed | Existing code and interfaces it touches identified
design planner 2 30 3 gather : Design the approach and interfaces for {the}
  Interfaces and data shapes decided | Affected modules and risks listed
implement coder 4 90 0 design : Implement {the}{in_files}
  The implementation covers every listed requirement | The code follows the project's style
tests coder 3 50 1 implement : Write unit tests covering {the}
  Tests cover the main paths and edge cases | Tests fail without the implementation
docs coder 2 30 4 implement : Document {the} for its users
  Usage and configuration documented | Examples run as written
run executor 2 60 2 tests : Run the test suite and linters against {the}{ver}
  All tests pass | Linters and type checks report no new problems
check judge 2 30 0 - : Validate that {the} meets the requirements
  Every requirement is met and tested | Every step's acceptance criteria are met
[generic] a general task, complexity 0.45
clarify planner 2 20 1 - : Break {the} down into concrete, checkable outcomes
  Outcomes listed | Each outcome has a way to check it
gather retriever 1 25 2 - : Gather the information and earlier work needed for {the}{refs}
  Relevant sources collected | Missing information listed
do * 3 60 0 clarify,gather : {goal}
  Each listed outcome achieved | The work is recorded where others can find it
summary retriever 2 30 3 do : Summarise the outcome of {the} for the requester
  Summary states what was done and what is left | Figures and sources included
check judge 2 30 0 - : Validate that {the} is achieved
  Every outcome checked | Every step's acceptance criteria are met
[pad]
risks planner 2 20 0 - : List the risks, edge cases and open questions for {the}
  Each risk has a likelihood and an impact | Each open question has an owner
safety guardian 2 20 0 - : Check the work on {the} for personal data, secrets and policy issues
  No personal data or secrets exposed | Applicable policies respected
crosscheck judge 2 30 0 - : Cross-check the intermediate results for {the} against their sources
  Every figure or claim traced to its source | Discrepancies resolved or flagged
"""


class Step(NamedTuple):
    key: str
    arm: str
    tier: int
    seconds: int
    keep: int
    after: tuple[str, ...]
    action: str
    criteria: tuple[str, ...]


class Kind(NamedTuple):
    label: str
    complexity: float
    cues: list[str]
    steps: list[Step]


@cache
def kinds() -> dict[str, Kind]:
    """The templates by kind, in priority order; the last step of each is its check."""
    found: dict[str, Kind] = {}
    lines = [line for line in TEMPLATES.strip().splitlines() if line.strip()]
    for line, criteria in zip(lines, [*lines[1:], ""], strict=True):
        if line.startswith("["):
            name, _, about = line[1:].partition("]")
            label, _, complexity = about.strip().partition(", complexity ")
            kind = found[name] = Kind(label, float(complexity or 0), [], [])
        elif line.startswith("cues:"):
            kind.cues.extend(cue.strip() for cue in line[5:].split(","))
        elif not line.startswith(" "):
            fields, action = line.split(" : ", 1)
            key, arm, tier, seconds, keep, after = fields.split()
            kind.steps.append(
                Step(key, arm, int(tier), int(seconds), int(keep),
                     tuple(after.split(",")) if after != "-" else (), action,
                     tuple(text.strip() for text in criteria.split(" | ")))
            )  # fmt: skip
    return found
