// Render the stock report (fetched as JSON) into the table.
async function loadStock(url) {
  const response = await fetch(url);
  if (!response.ok) throw new Error(`stock request failed: ${response.status}`);
  return response.json();
}

function renderRows(tbody, rows) {
  tbody.replaceChildren(
    ...rows.map((row) => {
      const tr = document.createElement("tr");
      for (const value of [row.sku, row.name, row.quantity]) {
        const td = document.createElement("td");
        td.textContent = String(value);
        tr.appendChild(td);
      }
      return tr;
    }),
  );
}

loadStock("stock.json").then((rows) => renderRows(document.querySelector("#stock tbody"), rows));
