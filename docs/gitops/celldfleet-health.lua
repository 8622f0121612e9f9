-- Argo CD health of a CelldFleet (celld.eric.dev/v1alpha1), from the conditions the operator
-- writes. One lifecycle reason explains Ready, Progressing and Blocked together; see
-- docs/gitops.md for the table this script implements. It uses only Lua's base library, so it
-- runs with the few libraries Argo CD opens for a custom health script.
local hs = {}

local function condition(kind)
  if obj.status == nil or obj.status.conditions == nil then
    return nil
  end
  for _, c in ipairs(obj.status.conditions) do
    if c.type == kind then
      return c
    end
  end
  return nil
end

local function explain(c, otherwise)
  if c ~= nil and c.message ~= nil and c.message ~= "" then
    return c.reason .. ": " .. c.message
  end
  return otherwise
end

-- Deleting: the operator drains the members, then removes its objects and the finalizer.
if obj.metadata.deletionTimestamp ~= nil then
  hs.status = "Progressing"
  hs.message = explain(condition("Deleting"), "The fleet is being deleted")
  return hs
end

-- Conditions that describe an earlier generation say nothing about the current spec.
if obj.status == nil or obj.status.observedGeneration ~= obj.metadata.generation then
  hs.status = "Progressing"
  hs.message = "Waiting for the operator to observe generation " .. tostring(obj.metadata.generation)
  return hs
end

-- Blocked: the user or an administrator must act. A pause is asked for, so it is Suspended;
-- any other blocker (a missing ServiceAccount, a foreign object, a member the scheduler cannot
-- place, a crash-looping template) is Degraded, even while the members are Ready.
local blocked = condition("Blocked")
if blocked ~= nil and blocked.status == "True" then
  if blocked.reason == "MaintenancePaused" then
    hs.status = "Suspended"
  else
    hs.status = "Degraded"
  end
  hs.message = explain(blocked, "The fleet is blocked")
  return hs
end

-- Progressing: a rollout, a replica change or a healing wait is under way.
local progressing = condition("Progressing")
if progressing ~= nil and progressing.status == "True" then
  hs.status = "Progressing"
  hs.message = explain(progressing, "The fleet is changing")
  return hs
end

local ready = condition("Ready")
if ready ~= nil and ready.status == "True" then
  hs.status = "Healthy"
  hs.message = explain(ready, "Every member is ready")
  return hs
end

hs.status = "Progressing"
hs.message = explain(ready, "Waiting for the operator to report the fleet")
return hs
