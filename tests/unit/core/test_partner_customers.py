"""Partner API customers, contacts and notes: subtree scoping, validation, the refusals."""
from __future__ import annotations

import pytest

from core.partner import customers, licenses
from core.errors import Conflict, Invalid, NotFound
from core.partner.scope import Page
from tests.support.fakes import caller_of


@pytest.fixture
def tree(uow, clock):
    """root -> reseller -> sub; and an unrelated root ``other``."""
    root = caller_of(uow, clock, "Root")
    reseller = caller_of(uow, clock, "Reseller", parent=root)
    sub = caller_of(uow, clock, "Sub", parent=reseller)
    other = caller_of(uow, clock, "Other")
    return root, reseller, sub, other


def test_create_numbers_customers_and_assigns_the_caller(uow, clock, tree):
    root, *_ = tree
    first = customers.create_customer(uow, clock, root, {"name": "Alpha", "billing_country": "DE"})
    second = customers.create_customer(uow, clock, root, {"name": "Beta"})
    assert (first.human_id, second.human_id) == ("C-1001", "C-1002")
    assert first.partner_id == root.partner.id and first.status == "active"


def test_a_partner_creates_for_its_subtree_only(uow, clock, tree):
    root, reseller, sub, other = tree
    made = customers.create_customer(uow, clock, reseller, {"name": "Down"}, partner_id=sub.partner.id)
    assert made.partner_id == sub.partner.id
    for owner in (root.partner.id, other.partner.id):
        with pytest.raises(NotFound):
            customers.create_customer(uow, clock, reseller, {"name": "Up"}, partner_id=owner)
    assert customers.list_customers(uow, reseller, Page()) == [made]


@pytest.mark.parametrize("values, field", [
    ({}, "name"), ({"name": "  "}, "name"), ({"name": "A", "status": "gone"}, "status"),
    ({"name": "A", "billing_country": "Germany"}, "billing_country"), ({"name": "A", "email": 5}, "email"),
])
def test_invalid_customers_are_refused_and_nothing_is_stored(uow, clock, tree, values, field):
    root, *_ = tree
    with pytest.raises(Invalid) as raised:
        customers.create_customer(uow, clock, root, values)
    assert field in raised.value.fields
    assert customers.list_customers(uow, root, Page()) == []


def test_foreign_and_missing_customers_are_the_same_404(uow, clock, tree):
    root, reseller, sub, other = tree
    mine = customers.create_customer(uow, clock, sub, {"name": "Sub's"})
    assert customers.get_customer(uow, root, mine.id) == mine  # ancestors see down the tree
    for caller, cid in ((other, mine.id), (root, "no-such-id")):
        with pytest.raises(NotFound, match="customer"):
            customers.get_customer(uow, caller, cid)
    with pytest.raises(NotFound):
        customers.update_customer(uow, other, mine.id, {"name": "Hijacked"})
    assert customers.get_customer(uow, sub, mine.id).name == "Sub's"


def test_list_is_newest_first_filtered_and_paged(uow, clock, tree):
    root, *_ = tree
    made = []
    for i in range(5):
        made.append(customers.create_customer(uow, clock, root, {"name": f"C{i}", "external_ref": f"x{i % 2}",
                                                                  "status": "prospect" if i == 3 else "active"}))
        clock.advance(60)
    assert [c.name for c in customers.list_customers(uow, root, Page(limit=2, offset=1))] == ["C3", "C2"]
    assert [c.name for c in customers.list_customers(uow, root, Page(), status="prospect")] == ["C3"]
    assert [c.name for c in customers.list_customers(uow, root, Page(), external_ref="x0")] == ["C4", "C2", "C0"]


def test_update_changes_only_editable_fields(uow, clock, tree):
    root, *_ = tree
    made = customers.create_customer(uow, clock, root, {"name": "Alpha"})
    changed = customers.update_customer(uow, root, made.id, {"name": "Alpha GmbH", "human_id": "C-1",
                                                             "partner_id": "x", "status": "suspended"})
    assert (changed.name, changed.human_id, changed.partner_id, changed.status) == \
        ("Alpha GmbH", made.human_id, made.partner_id, "suspended")
    with pytest.raises(Invalid):
        customers.update_customer(uow, root, made.id, {"postal_country": "deu"})
    assert customers.get_customer(uow, root, made.id) == changed


def test_delete_is_refused_while_a_license_lives(uow, clock, tree, service):
    from core.partner import contracts, editions

    root, *_ = tree
    editions.set_edition(uow, clock, "pro", "policy-pro")
    contract = contracts.create_contract(uow, clock, partner_id=root.partner.id, model="per-day", currency="EUR",
                                         unit_price_cents=10, known_models={"per-day"})
    made = customers.create_customer(uow, clock, root, {"name": "Alpha"})
    lic, _ = licenses.issue_license(uow, clock, service, root, customer_id=made.id, contract_id=contract.id,
                                    edition="pro")
    with pytest.raises(Conflict, match="1 license"):
        customers.delete_customer(uow, clock, root, made.id)
    licenses.terminate_license(uow, clock, service, root, lic.id)
    customers.delete_customer(uow, clock, root, made.id)
    with pytest.raises(NotFound):
        customers.get_customer(uow, root, made.id)
    assert customers.list_customers(uow, root, Page()) == []


def test_one_primary_contact_per_customer(uow, clock, tree):
    root, *_ = tree
    made = customers.create_customer(uow, clock, root, {"name": "Alpha"})
    first = customers.create_contact(uow, clock, root, made.id, {"first_name": "Ann", "is_primary": True})
    clock.advance(1)
    other = customers.create_contact(uow, clock, root, made.id, {"last_name": "Bo"})
    customers.update_contact(uow, clock, root, made.id, other.id, {"is_primary": True})
    listed = customers.list_contacts(uow, root, made.id)
    assert [(c.id, c.is_primary) for c in listed] == [(other.id, True), (first.id, False)]
    assert first.human_id == "P-1001"


def test_contact_rules(uow, clock, tree):
    root, reseller, sub, other = tree
    made = customers.create_customer(uow, clock, root, {"name": "Alpha"})
    second = customers.create_customer(uow, clock, root, {"name": "Beta"})
    with pytest.raises(Invalid, match="contact"):
        customers.create_contact(uow, clock, root, made.id, {"title": "Dr"})  # no name at all
    with pytest.raises(Invalid):
        customers.create_contact(uow, clock, root, made.id, {"first_name": "A", "is_primary": "yes"})
    contact = customers.create_contact(uow, clock, root, made.id, {"first_name": "Ann"})
    with pytest.raises(NotFound):  # a contact reached through another customer
        customers.update_contact(uow, clock, root, second.id, contact.id, {"first_name": "X"})
    with pytest.raises(NotFound):
        customers.delete_contact(uow, other, made.id, contact.id)
    with pytest.raises(Invalid):  # clearing the only name is refused
        customers.update_contact(uow, clock, root, made.id, contact.id, {"first_name": ""})
    customers.delete_contact(uow, root, made.id, contact.id)
    assert customers.list_contacts(uow, root, made.id) == []


def test_notes_are_appended_newest_first_and_never_empty(uow, clock, tree):
    root, reseller, *_ = tree
    made = customers.create_customer(uow, clock, reseller, {"name": "Alpha"})
    for body in ("first", "second"):
        customers.add_note(uow, clock, root, made.id, body)
    for body in ("", "   ", None, 42):
        with pytest.raises(Invalid):
            customers.add_note(uow, clock, root, made.id, body)
    notes = customers.list_notes(uow, reseller, made.id)
    assert [n.body for n in notes] == ["second", "first"] and notes[0].author == root.partner.id
