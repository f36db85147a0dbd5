//! health: the Columbian health-care simulation (Inncabs `health` from
//! BOTS, after Olden; "loop like", very fine: 1.02 µs tasks in seed 003's
//! Table V). A tree of villages, `cities` children each, every village
//! with a hospital of 2^level staff and 2^level × `ratio` inhabitants;
//! every time step simulates each village's subtree in parallel, then
//! the village: patients get sick (BOTS's `my_rand` per patient), wait,
//! are assessed, treated, sent home, or sent up to the parent hospital.
//!
//! The rules and the random number generator are BOTS's. Simplified:
//! lists are `Vec`s (appending and order-keeping removal, as BOTS's
//! linked lists); a village's own checks run after its children, not
//! concurrently with them; and the patients a child sends up are returned
//! to the parent through the join instead of being appended to the
//! parent's list under a lock. The parent takes them in increasing id, as
//! BOTS does (its "INSIEME fix"), so the order they arrive in does not
//! matter and every variant gives the same result. The parameters are
//! ours (BOTS reads them from input files not used here).

use crate::Benchmark;
use crate::fork::{Fork, mix, split, with_fork};

/// The simulation's parameters.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    /// Levels of villages; the root is at this level, leaves at 1.
    pub(crate) levels: i32,
    /// Children of every village above level 1.
    pub(crate) cities: i32,
    /// Inhabitants per staff member.
    pub(crate) ratio: i32,
    /// Time steps.
    pub(crate) steps: u32,
    /// Steps an assessment takes.
    pub(crate) assess_time: i32,
    /// Steps a treatment takes.
    pub(crate) convalescence_time: i32,
    /// The root seed.
    pub(crate) seed: i32,
    /// Chance an inhabitant gets sick in a step.
    pub(crate) get_sick_p: f32,
    /// Chance an assessed patient needs treatment.
    pub(crate) convalescence_p: f32,
    /// Chance a patient needing treatment is sent to the parent hospital.
    pub(crate) realloc_p: f32,
}

impl Params {
    /// Our parameters, not BOTS's (its input files are not used here): a
    /// guess that keeps every list busy, with a step of a 6-level tree
    /// (1,365 villages, 40,320 inhabitants) taking about 0.5 ms on one core.
    pub(crate) const DEFAULT: Params = Params {
        levels: 6,
        cities: 4,
        ratio: 10,
        steps: 400,
        assess_time: 3,
        convalescence_time: 10,
        seed: 1,
        get_sick_p: 0.01,
        convalescence_p: 0.3,
        realloc_p: 0.1,
    };
}

/// BOTS `my_rand`: a Park–Miller step on `seed`, as a float in [0, 1).
fn my_rand(seed: &mut i32) -> f32 {
    const IA: i32 = 16807;
    const IM: i32 = 2_147_483_647;
    const IQ: i32 = 127_773;
    const IR: i32 = 2836;
    const MASK: i32 = 123_459_876;
    let mut idum = *seed ^ MASK;
    let k = idum / IQ;
    idum = IA
        .wrapping_mul(idum - k * IQ)
        .wrapping_sub(IR.wrapping_mul(k));
    idum ^= MASK;
    if idum < 0 {
        idum = idum.wrapping_add(IM);
    }
    *seed = idum.wrapping_mul(IM);
    (1.0 / f64::from(IM)) as f32 * idum as f32
}

#[derive(Debug, Clone)]
struct Patient {
    id: u32,
    seed: i32,
    time: i64,
    time_left: i32,
    hosps_visited: i64,
}

#[derive(Debug, Default)]
struct Hosp {
    free_personnel: i32,
    waiting: Vec<Patient>,
    assess: Vec<Patient>,
    inside: Vec<Patient>,
}

#[derive(Debug)]
struct Village {
    level: i32,
    personnel: i32,
    population: Vec<Patient>,
    hosp: Hosp,
    children: Vec<Village>,
}

/// BOTS `allocate_village`: the subtree of village `vid` at `level`,
/// patient ids counted by `next_id`.
fn allocate(p: &Params, level: i32, vid: i32, next_id: &mut u32) -> Village {
    let personnel = 1 << level;
    let mut seed = vid.wrapping_mul(127_773i32.wrapping_add(p.seed));
    let population = (0..personnel * p.ratio)
        .map(|_| {
            let patient = Patient {
                id: *next_id,
                seed,
                time: 0,
                time_left: 0,
                hosps_visited: 0,
            };
            *next_id += 1;
            my_rand(&mut seed);
            patient
        })
        .collect();
    let children = if level > 1 {
        (1..=p.cities)
            .map(|i| {
                allocate(
                    p,
                    level - 1,
                    vid.wrapping_mul(p.cities).wrapping_add(i),
                    next_id,
                )
            })
            .collect()
    } else {
        Vec::new()
    };
    Village {
        level,
        personnel,
        population,
        hosp: Hosp {
            free_personnel: personnel,
            ..Hosp::default()
        },
        children,
    }
}

/// BOTS `put_in_hosp`.
fn put_in_hosp(p: &Params, hosp: &mut Hosp, mut patient: Patient) {
    patient.hosps_visited += 1;
    if let Err(patient) = start_assessment(p, hosp, patient) {
        hosp.waiting.push(patient);
    }
}

/// Starts assessing `patient` if a member of the personnel is free, else
/// hands the patient back.
fn start_assessment(p: &Params, hosp: &mut Hosp, mut patient: Patient) -> Result<(), Patient> {
    if hosp.free_personnel == 0 {
        return Err(patient);
    }
    hosp.free_personnel -= 1;
    patient.time_left = p.assess_time;
    patient.time += i64::from(patient.time_left);
    hosp.assess.push(patient);
    Ok(())
}

/// One time step of `v`'s subtree (BOTS `sim_village_par`); returns the
/// patients `v` sends to its parent.
fn sim_village<F: Fork>(f: F, p: &Params, v: &mut Village) -> Vec<Patient> {
    let mut realloc = split(
        f,
        &mut v.children,
        &|child: &mut Village| sim_village(f, p, child),
        &|mut a: Vec<Patient>, b| {
            a.extend(b);
            a
        },
    )
    .unwrap_or_default();
    let hosp = &mut v.hosp;
    // check_patients_inside
    for mut patient in std::mem::take(&mut hosp.inside) {
        patient.time_left -= 1;
        if patient.time_left == 0 {
            hosp.free_personnel += 1;
            v.population.push(patient);
        } else {
            hosp.inside.push(patient);
        }
    }
    // check_patients_assess_par
    let mut up = Vec::new();
    for mut patient in std::mem::take(&mut hosp.assess) {
        patient.time_left -= 1;
        if patient.time_left != 0 {
            hosp.assess.push(patient);
        } else if my_rand(&mut patient.seed) < p.convalescence_p {
            if my_rand(&mut patient.seed) > p.realloc_p || v.level == p.levels {
                patient.time_left = p.convalescence_time;
                patient.time += i64::from(patient.time_left);
                hosp.inside.push(patient);
            } else {
                hosp.free_personnel += 1;
                up.push(patient);
            }
        } else {
            hosp.free_personnel += 1;
            v.population.push(patient);
        }
    }
    // check_patients_waiting
    for patient in std::mem::take(&mut hosp.waiting) {
        if let Err(mut patient) = start_assessment(p, hosp, patient) {
            patient.time += 1;
            hosp.waiting.push(patient);
        }
    }
    // check_patients_realloc: lowest id first
    realloc.sort_unstable_by_key(|patient| patient.id);
    for patient in realloc {
        put_in_hosp(p, hosp, patient);
    }
    // check_patients_population
    for mut patient in std::mem::take(&mut v.population) {
        if my_rand(&mut patient.seed) < p.get_sick_p {
            put_in_hosp(p, hosp, patient);
        } else {
            v.population.push(patient);
        }
    }
    up
}

/// BOTS `get_results`, as one digest, and the number of patients.
fn results(v: &Village) -> (u64, u64) {
    let lists = [
        &v.population,
        &v.hosp.waiting,
        &v.hosp.assess,
        &v.hosp.inside,
    ];
    let mut h = mix(
        u64::from(v.personnel.unsigned_abs()),
        v.hosp.free_personnel as u64,
    );
    let mut patients = 0;
    for list in lists {
        h = mix(h, list.len() as u64);
        patients += list.len() as u64;
        for patient in list {
            h = mix(h, u64::from(patient.id));
            h = mix(h, patient.time as u64);
            h = mix(h, patient.hosps_visited as u64);
        }
    }
    for child in &v.children {
        let (c, n) = results(child);
        h = mix(h, c);
        patients += n;
    }
    (h, patients)
}

/// The health simulation with `p`, checked by its digest (against the
/// sequential variant's, by the harness) and by counting every patient.
pub(crate) fn benchmark(p: Params) -> Benchmark {
    Benchmark {
        name: "health",
        input: format!(
            "{} levels × {} cities, {} steps",
            p.levels, p.cities, p.steps
        ),
        prepare: Box::new(move || {
            let mut next_id = 0;
            let mut top = allocate(&p, p.levels, 0, &mut next_id);
            Box::new(move |par| {
                let lost: usize = with_fork!(par, |f| (0..p.steps)
                    .map(|_| sim_village(f, &p, &mut top).len())
                    .sum());
                Box::new(move || {
                    let (digest, patients) = results(&top);
                    if lost != 0 || patients != u64::from(next_id) {
                        return Err(format!(
                            "{patients} patients at the end, {next_id} at the start ({lost} sent above the root)"
                        ));
                    }
                    Ok(digest)
                })
            })
        }),
    }
}
