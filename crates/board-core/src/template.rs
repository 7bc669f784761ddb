//! Team templates (`kanban swarm TEMPLATE --goal TEXT`, `create --template`): a small
//! graph of steps with roles, written once under the home's `templates/` and made into a
//! card and its children in one transaction. The steps become the card's children (a step
//! repeated `workers` times is that many parallel children; `after` names the steps a
//! step waits for) and `root` is the card itself, done last, once every step is done:
//! N workers, then a verifier, then the synthesizer who writes the result up, say.
//!
//! Text may say `{goal}`, `{n}` (a repeated step's number, from 1) and `{workers}`;
//! nothing else is replaced, and the text is never more than a card's text.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::graph::NewTask;
use crate::plan::{
    child_limit, validate_fanout, write_plan, Mode, Plan, PlanBasis, PlanSettings, PlanWrites, PlannedTask,
};
use crate::refusal::Refusal;
use crate::store::{Committed, StoreResult};
use crate::types::Timestamp;

/// The most steps a template names, and the most workers a repeated step takes.
pub const STEPS_MAX: usize = 32;
pub const WORKERS_MAX: usize = 32;
/// The workers a repeated step has when no one says.
pub const DEFAULT_WORKERS: usize = 3;

/// A template as its YAML file says it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Template {
    #[serde(default)]
    pub description: String,
    /// The workers of a repeated step when `--workers` does not say.
    #[serde(default)]
    pub workers: Option<usize>,
    pub steps: Vec<Step>,
    pub root: Role,
}

/// One step: a role (or `workers` of them in parallel) and the steps it waits for.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Step {
    pub name: String,
    pub title: String,
    #[serde(default)]
    pub body: String,
    pub assignee: String,
    /// `workers` (the swarm's count) or a number; one when absent.
    #[serde(default)]
    pub repeat: Option<Repeat>,
    /// Earlier steps this one waits for, by name.
    #[serde(default)]
    pub after: Vec<String>,
}

/// Who does a step and what its card says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Role {
    pub title: String,
    #[serde(default)]
    pub body: String,
    pub assignee: String,
}

/// How many cards a step makes.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Repeat {
    Times(usize),
    Word(String),
}

/// A template made for one goal: the card, its children and the profile that does the
/// card last.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Instance {
    pub root: NewTask,
    pub plan: Plan,
    /// The card's profile, the plan's orchestrator.
    pub root_assignee: String,
    /// Each child's step, in the plan's order.
    pub steps: Vec<String>,
}

/// Making a card and its plan at once: what a template needs of a store.
pub trait GraphWrites: Send + Sync {
    /// Creates `root` (a triage card) and commits `plan` under it, as a person's
    /// decomposition with `settings`, in one transaction: the whole graph or nothing.
    fn create_planned(
        &self,
        root: &NewTask,
        plan: &Plan,
        settings: &PlanSettings,
        now: Timestamp,
    ) -> StoreResult<Committed>;
}

/// [`GraphWrites::create_planned`] through a store's plan writes, in one order for every
/// store: the card, then the plan as [`write_plan`] commits it.
pub fn write_new(
    w: &mut impl PlanWrites,
    root: &NewTask,
    plan: &Plan,
    settings: &PlanSettings,
    now: Timestamp,
) -> StoreResult<Committed> {
    if !root.triage || !root.parents.is_empty() || root.idempotency_key.is_some() {
        return Err(Refusal::Invalid("a planned card starts alone in triage".into()).into());
    }
    let id = w.unused_task_id(&[])?;
    let created = crate::graph::create(root, id.clone(), &[], now)?;
    w.insert_created(created, now)?;
    let basis = PlanBasis::of(&w.facts(&id)?);
    write_plan(w, &id, &basis, Mode::Manual, plan, settings, now)
}

fn invalid(why: String) -> Refusal {
    Refusal::InvalidPlan(why)
}

impl Template {
    /// Refuses a template that could never be made: no steps or too many, a step name
    /// blank or used twice, `after` naming a step not before it, a blank title or
    /// assignee, a repeat that is neither a number from 1 to [`WORKERS_MAX`] nor
    /// `workers`.
    pub fn check(&self) -> Result<(), Refusal> {
        if self.steps.is_empty() || self.steps.len() > STEPS_MAX {
            return Err(invalid(format!(
                "a template has 1 to {STEPS_MAX} steps, not {}",
                self.steps.len()
            )));
        }
        let mut seen: Vec<&str> = Vec::new();
        for step in &self.steps {
            let name = step.name.trim();
            if name.is_empty() || seen.contains(&name) {
                return Err(invalid(format!(
                    "step names are not blank and not used twice: {name:?}"
                )));
            }
            if let Some(missing) = step.after.iter().find(|a| !seen.contains(&a.trim())) {
                return Err(invalid(format!(
                    "step {name} waits for {missing:?}, which is not a step before it"
                )));
            }
            step.role().check(name)?;
            step.times(DEFAULT_WORKERS)?;
            seen.push(name);
        }
        self.root.check("root")?;
        match self.workers {
            Some(n) if !(1..=WORKERS_MAX).contains(&n) => {
                Err(invalid(format!("workers is 1 to {WORKERS_MAX}, not {n}")))
            }
            _ => Ok(()),
        }
    }

    /// The card and its children for `goal`, with `workers` (else the template's, else
    /// [`DEFAULT_WORKERS`]) cards for each repeated step, checked as a decomposition's
    /// plan is, with at most `max_children` children.
    pub fn instantiate(
        &self,
        goal: &str,
        workers: Option<usize>,
        max_children: usize,
    ) -> Result<Instance, Refusal> {
        self.check()?;
        if goal.trim().is_empty() {
            return Err(invalid("a swarm needs a goal".into()));
        }
        let workers = workers.or(self.workers).unwrap_or(DEFAULT_WORKERS);
        if !(1..=WORKERS_MAX).contains(&workers) {
            return Err(invalid(format!("workers is 1 to {WORKERS_MAX}, not {workers}")));
        }
        let fill = |text: &str, n: usize| {
            text.replace("{goal}", goal.trim())
                .replace("{n}", &n.to_string())
                .replace("{workers}", &workers.to_string())
        };
        let mut indices: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        let (mut tasks, mut steps) = (Vec::new(), Vec::new());
        for step in &self.steps {
            let parents: Vec<usize> = step
                .after
                .iter()
                .flat_map(|a| indices[a.trim()].iter().copied())
                .collect();
            let mut made = Vec::new();
            for n in 1..=step.times(workers)? {
                made.push(tasks.len());
                steps.push(step.name.trim().to_owned());
                tasks.push(PlannedTask {
                    title: fill(&step.title, n),
                    body: fill(&step.body, n),
                    assignee: step.assignee.trim().to_owned(),
                    parents: parents.clone(),
                });
            }
            indices.insert(step.name.trim(), made);
        }
        let limit = child_limit(max_children);
        if tasks.len() > limit {
            return Err(invalid(format!(
                "the template makes {} cards for the goal, over kanban.decompose_max_children ({limit}); ask for fewer --workers",
                tasks.len()
            )));
        }
        validate_fanout(&tasks, max_children).map_err(|e| invalid(e.to_string()))?;
        let root = NewTask {
            title: fill(&self.root.title, 1),
            body: fill(&self.root.body, 1),
            triage: true,
            ..NewTask::default()
        };
        root.check_sizes()?;
        Ok(Instance {
            root,
            plan: Plan::Fanout {
                rationale: Some(format!("made from a template with {workers} workers")),
                tasks,
            },
            root_assignee: self.root.assignee.trim().to_owned(),
            steps,
        })
    }
}

impl Step {
    fn role(&self) -> Role {
        Role {
            title: self.title.clone(),
            body: self.body.clone(),
            assignee: self.assignee.clone(),
        }
    }

    /// How many cards the step makes when a swarm has `workers`.
    fn times(&self, workers: usize) -> Result<usize, Refusal> {
        match &self.repeat {
            None => Ok(1),
            Some(Repeat::Times(n)) if (1..=WORKERS_MAX).contains(n) => Ok(*n),
            Some(Repeat::Word(w)) if w.trim() == "workers" => Ok(workers),
            Some(other) => Err(invalid(format!(
                "step {}: repeat is `workers` or 1 to {WORKERS_MAX}, not {other:?}",
                self.name
            ))),
        }
    }
}

impl Role {
    fn check(&self, step: &str) -> Result<(), Refusal> {
        if self.title.trim().is_empty() || self.assignee.trim().is_empty() {
            return Err(invalid(format!("{step}: a title and an assignee are needed")));
        }
        crate::limits::short("the assignee", &self.assignee)?;
        crate::limits::text("the body", &self.body)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn role(title: &str, assignee: &str) -> Role {
        Role {
            title: title.into(),
            body: "For: {goal}".into(),
            assignee: assignee.into(),
        }
    }

    fn step(name: &str, title: &str, assignee: &str, repeat: Option<Repeat>, after: &[&str]) -> Step {
        Step {
            name: name.into(),
            title: title.into(),
            body: "For: {goal}".into(),
            assignee: assignee.into(),
            repeat,
            after: after.iter().map(|a| (*a).to_owned()).collect(),
        }
    }

    fn swarm() -> Template {
        Template {
            description: String::new(),
            workers: None,
            steps: vec![
                step(
                    "research",
                    "Research {n} of {workers}: {goal}",
                    "researcher",
                    Some(Repeat::Word("workers".into())),
                    &[],
                ),
                step("verify", "Check the findings", "reviewer", None, &["research"]),
            ],
            root: role("Write up: {goal}", "writer"),
        }
    }

    #[test]
    fn repeated_steps_fan_out_and_later_steps_wait_for_all_of_them() {
        let made = swarm().instantiate("cheaper builds", Some(2), 8).unwrap();
        let Plan::Fanout { tasks, .. } = &made.plan else {
            panic!("{made:?}")
        };
        let shown: Vec<(&str, &str, &[usize])> = tasks
            .iter()
            .map(|t| (t.title.as_str(), t.assignee.as_str(), &t.parents[..]))
            .collect();
        assert_eq!(
            shown,
            [
                ("Research 1 of 2: cheaper builds", "researcher", &[][..]),
                ("Research 2 of 2: cheaper builds", "researcher", &[][..]),
                ("Check the findings", "reviewer", &[0, 1][..]),
            ]
        );
        assert_eq!(tasks[2].body, "For: cheaper builds");
        assert_eq!(
            (made.root.title.as_str(), made.root.triage),
            ("Write up: cheaper builds", true)
        );
        assert_eq!(made.root_assignee, "writer");
        assert_eq!(made.steps, ["research", "research", "verify"]);
        let three = swarm().instantiate("x", None, 8).unwrap();
        assert!(matches!(&three.plan, Plan::Fanout { tasks, .. } if tasks.len() == DEFAULT_WORKERS + 1));
    }

    #[test]
    fn templates_that_cannot_be_made_are_refused() {
        let mut later = swarm();
        later.steps[1].after = vec!["write".into()];
        let mut twice = swarm();
        twice.steps[1].name = "research".into();
        let mut blank = swarm();
        blank.root.assignee = " ".into();
        let mut odd = swarm();
        odd.steps[0].repeat = Some(Repeat::Word("many".into()));
        let mut none = swarm();
        none.steps.clear();
        for (t, why) in [
            (later, "not a step before it"),
            (twice, "used twice"),
            (blank, "an assignee"),
            (odd, "repeat is"),
            (none, "1 to 32 steps"),
        ] {
            let e = t.check().unwrap_err().to_string();
            assert!(e.contains(why), "{why}: {e}");
        }
        for (workers, max, why) in [
            (Some(0), 8, "workers is"),
            (Some(40), 8, "workers is"),
            (Some(9), 8, "over kanban.decompose_max_children (8)"),
        ] {
            assert!(swarm()
                .instantiate("x", workers, max)
                .unwrap_err()
                .to_string()
                .contains(why));
        }
        assert!(swarm().instantiate("  ", None, 8).is_err());
    }
}
