"""iDRAC's job queue: how the Dell shapes report a firmware update (issue 51).

A shape with ``update_jobs`` (idrac9, idrac10, dell-r6515) answers
``SimpleUpdate`` as iDRAC does: 202 with no body and ``Location`` a job in
the Manager's queue, ``Managers/iDRAC.Embedded.1/Oem/Dell/Jobs/JID_<12
digits>``, not a DMTF Task. A job is a ``DellJob`` shaped as bmclib's
recorded queue (``tests/fixtures/redfish-trees/dell-r660/.../Jobs``): one
``JobState``, ``PercentComplete`` and one ``MessageId``/``Message`` of its own
(no ``Messages`` array). The machine's update (:mod:`bmaas.fakes.firmware`)
decides it, so the update effects land on the job as on a task:

============  ==============  ====================================================
update        ``JobState``    ``MessageId``: ``Message``
============  ==============  ====================================================
New           Scheduled       JCP001: Task successfully scheduled.
Running       Running         PR20: Job in progress. (``task_hang``: for ever)
Completed     Completed       RED001: Job completed successfully.
Exception     Failed          RED007: Unable to verify Update Package signature.
                              (``update_rejected``; Dell KB 000135299)
============  ==============  ====================================================

Where each id and text comes from (checked for issue 51):

* ``JCP001`` "Task successfully scheduled." (a ``Scheduled`` FirmwareUpdate
  job) and ``RED001`` "Job completed successfully." (a ``Completed`` one):
  the recorded queue, ``tests/fixtures/redfish-trees/dell-r660/Managers/
  iDRAC.Embedded.1/Oem/Dell/Jobs`` (bmclib's fixtures, Apache-2.0; see its
  ``SOURCE.md``).
* ``RED007`` "Unable to verify Update Package signature.": Dell's knowledge
  base article 000135299, https://www.dell.com/support/kbdoc/000135299
  (a failed iDRAC firmware update job; the id and text are quoted as facts,
  nothing else is taken from the page).
* ``PR20`` "Job in progress.": not confirmed by any public source found (the
  recorded queue holds no running job; its ``PR19`` "Job completed
  successfully." closes a BIOS configuration job). bmaas decides by a
  running job's ``JobState``, never by its id.
"""

from __future__ import annotations

from typing import Any

from bmaas.hwlab.redfish.bmc import Bmc

__all__ = ["collection", "job", "job_path", "jobs_path"]

#: the first job's number: iDRAC's ids are ``JID_`` and 12 digits
_JID = 100_000_000_000

#: the update's state -> (JobState, MessageId, Message), as iDRAC writes them
_STATES = {
    "New": ("Scheduled", "JCP001", "Task successfully scheduled."),
    "Running": ("Running", "PR20", "Job in progress."),
    "Completed": ("Completed", "RED001", "Job completed successfully."),
    "Exception": ("Failed", "RED007", "Unable to verify Update Package signature."),
}


def jobs_path(bmc: Bmc) -> str | None:
    """The Manager's job queue when ``bmc`` reports updates as jobs, else None."""
    shape = bmc.shape.shape if bmc.shape is not None else None
    if shape is None or not shape.update_jobs:
        return None
    return f"{shape.manager_path}/Oem/Dell/Jobs"


def job_path(jobs: str, number: int) -> str:
    return f"{jobs}/JID_{_JID + number}"


def job(bmc: Bmc, jobs: str, number: int) -> dict[str, Any]:
    """The job of the machine's update ``number`` as it stands now."""
    _components, updates, now = bmc.machine.firmware_now()
    update = updates[number - 1]
    state, percent = update.progress(now)
    job_state, message_id, message = _STATES[state]
    path = job_path(jobs, number)
    return {
        "@odata.context": "/redfish/v1/$metadata#DellJob.DellJob",
        "@odata.id": path,
        "@odata.type": "#DellJob.v1_1_0.DellJob",
        "ActualRunningStartTime": None,
        "ActualRunningStopTime": None,
        "CompletionTime": None,
        "Description": "Job Instance",
        "EndTime": "TIME_NA",
        "Id": path.rsplit("/", 1)[-1],
        "JobState": job_state,
        "JobType": "FirmwareUpdate",
        "Message": message,
        "MessageArgs": [],
        "MessageArgs@odata.count": 0,
        "MessageId": message_id,
        "Name": f"Firmware Update: {update.target}",
        "PercentComplete": percent,
        "StartTime": "TIME_NOW",
        "TargetSettingsURI": None,
    }


def collection(bmc: Bmc, jobs: str) -> dict[str, Any]:
    """The queue, its members expanded as iDRAC (and bmclib's recording) shows them."""
    members = [job(bmc, jobs, u.number) for u in bmc.machine.firmware_now()[1]]
    return {
        "@odata.context": "/redfish/v1/$metadata#DellJobCollection.DellJobCollection",
        "@odata.type": "#DellJobCollection.DellJobCollection",
        "@odata.id": jobs,
        "Description": "Collection of Job Instances",
        "Members": members,
        "Members@odata.count": len(members),
        "Name": "JobQueue",
    }
